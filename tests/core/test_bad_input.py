"""Every bad input gives a clear error (file and line where there is one, a hint) and exit != 0."""

from pathlib import Path

import pytest

from tritonforge.cli import main

KERNEL = '''
import torch, triton, triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass

def entry(x):
    return x
'''


def _run(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr().err


def test_missing_file(capsys, tmp_path):
    code, err = _run(capsys, "run", str(tmp_path / "nope.py"), "--device", "cpu")
    assert code == 2 and "does not exist" in err and "(fix: " in err and err.count("\n") == 1


def test_syntax_error_names_the_line(capsys, tmp_path):
    f = tmp_path / "bad.py"
    f.write_text("import triton\n\ndef broken(:\n    pass\n")
    code, err = _run(capsys, "run", str(f), "--device", "cpu")
    assert code == 2 and f"{f}:3" in err and "syntax error" in err


def test_file_without_kernel(capsys, tmp_path):
    f = tmp_path / "plain.py"
    f.write_text("def entry(x):\n    return x\n")
    code, err = _run(capsys, "run", str(f), "--device", "cpu")
    assert code == 2 and "no @triton.jit kernel" in err


def test_unknown_entry(capsys, tmp_path):
    f = tmp_path / "k.py"
    f.write_text(KERNEL)
    (tmp_path / "k.toml").write_text('entry = "nosuch"\n[[case]]\nargs = [{ tensor = [4] }]\n')
    code, err = _run(capsys, "run", str(f), "--device", "cpu")
    assert code == 2 and "'nosuch'" in err and "entry points found: entry" in err


def test_spec_without_cases(capsys, tmp_path):
    f = tmp_path / "k.py"
    f.write_text(KERNEL)
    (tmp_path / "k.toml").write_text('entry = "entry"\n')
    code, err = _run(capsys, "run", str(f), "--device", "cpu")
    assert code == 2 and "no cases" in err


def test_missing_spec_suggests_testgen(capsys, tmp_path):
    f = tmp_path / "k.py"
    f.write_text(KERNEL)
    code, err = _run(capsys, "run", str(f), "--device", "cpu")
    assert code == 2 and "testgen" in err


def test_unknown_tritonbench_name(capsys):
    from tritonforge.tasks.tritonbench import default_data_dir

    if default_data_dir() is None:
        pytest.skip("TritonBench-G data not beside this checkout")
    code, err = _run(capsys, "run", "--tritonbench", "softmax_trition2", "--device", "cpu")
    assert code == 2 and "not in the TritonBench-G data" in err and "softmax" in err


@pytest.mark.parametrize("share, why", [("2", "not between 0 and 1"), ("half", "not a number")])
def test_a_rewarm_share_outside_0_to_1_is_refused(capsys, share, why):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "baseline", "--rewarm-share", share, "--device", "cpu"])
    assert exc.value.code == 2 and why in capsys.readouterr().err
