"""Every bad input the CLI can be given ends in one line that names the problem and the fix, with
the documented exit code (README, `tritonforge --help`), and is caught before any kernel runs."""

import time
import pytest

from tritonforge.cli import main

KERNEL = '''
import torch, triton, triton.language as tl

@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

def entry(x):
    out = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out
'''
SPEC = 'entry = "entry"\n[[case]]\nargs = [{ tensor = [100] }]\n'


@pytest.fixture
def kernel(tmp_path):
    f = tmp_path / "k.py"
    f.write_text(KERNEL)
    (tmp_path / "k.toml").write_text(SPEC)
    return f


def _error_line(capsys, argv, code):
    """Run the CLI; assert the exit code and that stderr holds exactly one error line, no
    traceback; return that line."""
    try:
        got = main([str(a) for a in argv])
    except SystemExit as exc:          # argparse's refusals
        got = exc.code
    err = capsys.readouterr().err
    assert got == code, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


def test_missing_torch_is_exit_3(capsys, kernel, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    line = _error_line(capsys, ["run", kernel, "--device", "cpu"], 3)
    assert "torch is not installed" in line and "pip install 'torch>=" in line


def test_missing_triton_is_exit_3(capsys, kernel, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "triton" else real(name, *a))
    line = _error_line(capsys, ["optimize", kernel, "--device", "cpu"], 3)
    assert "triton is not installed" in line and ".ci/run" in line


def test_run_dir_under_a_file(capsys, kernel, tmp_path):
    blocker = tmp_path / "plain-file"
    blocker.write_text("")
    line = _error_line(capsys, ["optimize", kernel, "--device", "cpu",
                                "--run-dir", blocker / "runs"], 2)
    assert "--run-dir" in line and "not writable" in line and "fix:" in line


def test_run_dir_that_is_a_file(capsys, kernel, tmp_path):
    blocker = tmp_path / "plain-file"
    blocker.write_text("")
    line = _error_line(capsys, ["run", kernel, "--device", "cpu", "--run-dir", blocker], 2)
    assert "is a file, not a directory" in line


def test_unwritable_out_fails_before_any_work(capsys, kernel, tmp_path):
    blocker = tmp_path / "plain-file"
    blocker.write_text("")
    start = time.perf_counter()
    line = _error_line(capsys, ["optimize", kernel, "--device", "cpu", "--run-dir",
                                tmp_path / "runs", "--out", blocker / "out"], 2)
    assert "--out" in line and "not writable" in line
    assert time.perf_counter() - start < 5
    assert not (tmp_path / "runs" / "store.sqlite").exists()      # nothing ran


@pytest.mark.parametrize("text, fix", [
    ('sedes = 3\n' + SPEC, "did you mean 'seeds'?"),
    ('entri = "entry"\n[[case]]\nargs = [{ tensor = [4] }]\n', "did you mean 'entry'?"),
    ('entry = "entry"\n[[case]]\nargz = [{ tensor = [4] }]\n', "did you mean 'args'?"),
    ('entry = "entry"\n[[case]]\nrol = "performance"\nargs = [{ tensor = [4] }]\n',
     "did you mean 'role'?"),
    ('entry = "entry"\n[[case]]\nargs = [{ tensor = [4], dtpye = "float16" }]\n',
     "did you mean 'dtype'?"),
])
def test_spec_key_typos_are_refused_with_did_you_mean(capsys, kernel, text, fix):
    (kernel.parent / "k.toml").write_text(text)
    line = _error_line(capsys, ["run", kernel, "--device", "cpu"], 2)
    assert "unknown" in line and fix in line and "k.toml" in line


@pytest.mark.parametrize("flag, value, why", [
    ("--budget", "-5", "-5 is not above 0"),
    ("--budget", "soon", "'soon' is not a number"),
    ("--timeout", "-1", "-1 is not above 0"),
    ("--rounds", "0", "0 is below 1"),
    ("--jobs", "0", "0 is below 1"),
])
def test_bad_numbers_are_refused(capsys, kernel, flag, value, why):
    line = _error_line(capsys, ["optimize", kernel, "--device", "cpu", flag, value], 2)
    assert flag in line and why in line


def test_unknown_case_id(capsys, kernel, tmp_path):
    line = _error_line(capsys, ["run", kernel, "--device", "cpu", "--run-dir", tmp_path / "r",
                                "--cases", "nosuch"], 2)
    assert "unknown case ids: nosuch" in line and "known: corr-1" in line


def test_missing_config_file(capsys, kernel, tmp_path):
    line = _error_line(capsys, ["run", kernel, "--config", tmp_path / "none.toml"], 2)
    assert "does not exist" in line and "--config" in line


def test_file_and_tritonbench_together(capsys, kernel):
    line = _error_line(capsys, ["run", kernel, "--tritonbench", "softmax"], 2)
    assert "not both" in line


def test_neither_file_nor_tritonbench(capsys):
    line = _error_line(capsys, ["optimize", "--device", "cpu"], 2)
    assert "give a kernel FILE" in line and "sin_block4.py" in line


def test_testgen_refuses_to_overwrite_a_spec(capsys, kernel):
    line = _error_line(capsys, ["testgen", kernel, "--device", "cpu"], 2)
    assert "already exists" in line and "--force" in line


def test_cuda_without_a_gpu(capsys, kernel):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    line = _error_line(capsys, ["run", kernel, "--device", "cuda"], 3)
    assert "no CUDA GPU" in line and "--device cpu" in line


@pytest.mark.parametrize("body", ['raise RuntimeError("always fails")', "import time; time.sleep(600)"])
def test_optimize_exits_1_when_the_original_fails_every_case(capsys, tmp_path, body):
    f = tmp_path / "k.py"
    f.write_text(KERNEL.replace("    out = torch.empty_like(x)\n", f"    {body}\n"))
    (tmp_path / "k.toml").write_text(SPEC)
    line = _error_line(capsys, ["optimize", f, "--device", "cpu", "--run-dir", tmp_path / "r",
                                "--timeout", "3"], 1)
    assert "the original fails every case" in line and "tritonforge run" in line
    assert "faster file" not in capsys.readouterr().out


def test_testgen_with_the_default_relative_run_dir(capsys, tmp_path, monkeypatch):
    """The tracing process runs in another working directory: a relative run directory (the
    default) must still resolve (it once ended in "the tracing process died without a trace")."""
    f = tmp_path / "k.py"
    f.write_text(KERNEL + "\n\ndef test_copy():\n    x = torch.randn(300)\n"
                          "    assert torch.equal(entry(x), x)\n")
    monkeypatch.chdir(tmp_path)
    code = main(["testgen", "k.py", "--device", "cpu", "--no-perf", "--no-stability"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert (tmp_path / "k.toml").exists() and (tmp_path / "tritonforge-runs" / "default").is_dir()


def test_rounds_above_the_interpreter_cap_are_announced(capsys, kernel, tmp_path):
    code = main(["optimize", str(kernel), "--device", "cpu", "--rounds", "5", "--run-dir",
                 str(tmp_path / "r"), "--budget", "0.001"])
    err = capsys.readouterr().err
    assert code == 0 and "5 rounds asked for; the CPU interpreter runs at most 2" in err


def test_help_shows_examples_and_exit_codes(capsys):
    import pytest as _pytest

    with _pytest.raises(SystemExit) as exc:
        main(["--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert "examples:" in out and "exit codes:" in out and "130 interrupted" in out
    assert "tritonforge optimize src/tritonforge/examples/sin_block4.py" in out
    assert "``" not in out                       # no developer docstring


@pytest.mark.parametrize("table, fix", [("[tolerance.float32]\natol = 1e-4\nrtoll = 1e-4\n",
                                         "did you mean 'rtol'?"),
                                        ("[tolerance.flaot32]\natol = 1e-4\n",
                                         "did you mean 'float32'?")])
def test_tolerance_typos_are_refused(capsys, kernel, table, fix):
    (kernel.parent / "k.toml").write_text(SPEC + table)
    line = _error_line(capsys, ["run", kernel, "--device", "cpu"], 2)
    assert "unknown key" in line and fix in line


def test_a_settings_file_typo_gets_did_you_mean(capsys, kernel, tmp_path):
    cfg = tmp_path / "tf.toml"
    cfg.write_text("case_timout_s = 30\n")
    line = _error_line(capsys, ["run", kernel, "--device", "cpu", "--config", cfg], 2)
    assert "unknown setting 'case_timout_s'" in line and "did you mean 'case_timeout_s'?" in line
