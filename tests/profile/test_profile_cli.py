"""``tritonforge profile``: the command on the CPU, its GPU path with a stand-in ncu, its pieces.

The CPU run records the bundled example's launches through the interpreter (not executed) and
compiles them for sm_90; the "GPU" run replaces the device check, the timing worker and the peaks
by stand-ins and ncu by a script that runs the profiled command and hands back a recorded H200
CSV, so everything between (the ncu command line, the launch capture, accounting, roofline,
diagnosis, JSON, store) runs for real. Each test that starts a child process costs a few seconds
(importing torch there), so the CLI runs are shared by module-scoped fixtures.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tritonforge import cli
from tritonforge.analyze import analyze_source
from tritonforge.api import load_task
from tritonforge.model import Bound, CompileStats, DeviceInfo, Profile
from tritonforge.model.serialize import loads
from tritonforge.profile import accounting, session
from tritonforge.profile.build import build_profile
from tritonforge.profile.metrics import parse_raw_csv
from tritonforge.profile.roofline import Peaks, place
from tritonforge.runtime import standalone
from tritonforge.runtime.standalone import CapturedLaunch, TensorInfo, Unsupported
from tritonforge.store import RunStore

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples"
SIN = EXAMPLES / "sin_block4.py"
ADD = EXAMPLES / "vector_add.py"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"


def _peaks() -> Peaks:
    return Peaks(**next(iter(json.loads((FIXTURES / "h200_peaks.json").read_text()).values())))


# ---- the command on the CPU -----------------------------------------------------------------

@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("cpu-profile")
    import io
    from contextlib import redirect_stdout
    out = io.StringIO()
    with redirect_stdout(out):
        rc = cli.main(["profile", str(SIN), "--device", "cpu", "--run-dir", str(run_dir)])
    return rc, out.getvalue(), run_dir


def test_cpu_profile_has_static_stats_and_diagnosis(cpu_run):
    rc, text, run_dir = cpu_run
    assert rc == 0, text
    profile = loads((run_dir / "profile.json").read_text())
    assert isinstance(profile, Profile)
    assert profile.case_id == "perf-16M"                       # the last performance case
    assert profile.source == "static-only"
    (stats,) = profile.compile_stats
    assert stats.kernel == "sin_kernel" and stats.target == "cuda:90" and stats.error is None
    assert dict(stats.constexprs) == {"BLOCK_SIZE": 4}
    assert (stats.num_warps, stats.num_stages) == (4, 3)
    assert stats.registers and stats.registers > 0
    assert profile.diagnosis.bottleneck == "too little work per program"
    assert profile.diagnosis.hints[0].kind == "larger_blocks"
    assert profile.roofline is None and not profile.kernels
    assert any("without running them" in n for n in profile.notes)
    for part in ("profile of sin_block4, case perf-16M (source: static-only)", "diagnosis:",
                 "larger_blocks", "BLOCK_SIZE=4", "registers", str(run_dir / "profile.json")):
        assert part in text
    with RunStore(run_dir / "store.sqlite") as store:
        task = store.get_task("sin_block4")
        assert store.latest_profile("sin_block4", task.source_hash) == profile


# ---- the GPU path, with stand-ins for the device, the timing worker, the peaks and ncu --------

FAKE_NCU = """\
#!{python}
# A stand-in for ncu: checks the options TritonForge passes, runs the program, returns a CSV.
import os, shutil, subprocess, sys
argv = sys.argv[1:]
app = argv.index({python!r})
opts = argv[:app]
assert opts[opts.index("--profile-from-start") + 1] == "off", opts
assert "regex:^(sin_kernel)$" in opts and "--launch-skip" in opts, opts
with open(os.environ["FAKE_NCU_SEEN"], "w") as fh:
    fh.write(" ".join(argv))
rc = subprocess.call(argv[app:])
shutil.copy(os.environ["FAKE_NCU_CSV"], opts[opts.index("--log-file") + 1])
sys.exit(rc)
"""


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu-profile")
    fake = tmp / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    mp = pytest.MonkeyPatch()
    mp.setenv("TRITONFORGE_NCU", str(fake))
    mp.setenv("FAKE_NCU_CSV", str(FIXTURES / "h200_sin_basic_raw.csv"))
    mp.setenv("FAKE_NCU_SEEN", str(tmp / "seen.txt"))
    mp.setattr(session, "resolve_device", lambda setting: "cuda")
    mp.setattr(session, "_time_cases", lambda task, settings, run_dir, store, case_id: (
        {"small": 0.0101}, {}, DeviceInfo("NVIDIA H200 (stand-in)", False, capability="9.0")))
    mp.setattr(session, "measure_peaks_isolated", lambda timeout_s=300.0: (_peaks(), None))
    real_env = session._child_env
    mp.setattr(session, "_child_env", lambda device, perf_inputs_dir=None: real_env("cpu"))
    import io
    from contextlib import redirect_stdout
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            rc = cli.main(["profile", str(SIN), "--case", "small", "--json", "--run-dir", str(tmp),
                           "--out", str(tmp / "out" / "sin.json")])
    finally:
        mp.undo()
    return rc, out.getvalue(), tmp


def test_gpu_path_profiles_one_call_under_ncu(gpu_run):
    rc, text, tmp = gpu_run
    assert rc == 0, text
    printed = loads(json.dumps(json.loads(text)))           # --json prints the profile
    written = loads((tmp / "out" / "sin.json").read_text())
    assert printed == written
    p = written
    assert p.source == "ncu" and p.case_id == "small"
    assert [k.kernel for k in p.kernels] == ["sin_kernel", "sin_kernel"]
    assert dict(p.compile_stats[0].constexprs) == {"BLOCK_SIZE": 4}
    d = p.diagnosis
    assert d.bottleneck == "too little work per program" and d.hints[0].kind == "larger_blocks"
    assert d.evidence[0].startswith("Nsight Compute metrics of sin_kernel")
    r = p.roofline                      # the fixture has no DRAM byte counters: bytes estimated
    assert r is not None and r.bytes_moved == 2 * 1000 * 4 and r.time_us == pytest.approx(10.1)
    assert r.peak_bw_gbs == pytest.approx(_peaks().dram_bw_gbs)
    assert any("bytes: estimated" in n for n in p.notes)
    seen = (tmp / "seen.txt").read_text()
    assert "tritonforge.runtime.standalone" in seen and "--profiler-range" in seen
    capture = standalone.read_capture(tmp / "profile" / "sin_block4" / "launches.json")
    assert capture.launches_per_call == 1 and capture.warmup_launches == 1 and not capture.error


def test_a_caller_that_timed_the_case_is_not_timed_again(tmp_path):
    """The optimization loop passes its baseline's time: no worker is started to time it again,
    and the children get the run's shared perf-script inputs."""
    from tritonforge.config import Settings
    from tritonforge.runtime.perf_inputs import ENV_DIR

    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    envs = []
    real_env = session._child_env

    def child_env(device, perf_inputs_dir=None):
        envs.append(real_env("cuda", perf_inputs_dir).get(ENV_DIR))
        return real_env("cpu")

    def no_timing(*args):
        raise AssertionError("timed again")

    mp = pytest.MonkeyPatch()
    mp.setenv("TRITONFORGE_NCU", str(fake))
    mp.setenv("FAKE_NCU_CSV", str(FIXTURES / "h200_sin_basic_raw.csv"))
    mp.setenv("FAKE_NCU_SEEN", str(tmp_path / "seen.txt"))
    mp.setattr(session, "resolve_device", lambda setting: "cuda")
    mp.setattr(session, "_time_cases", no_timing)
    mp.setattr(session, "measure_peaks_isolated", lambda timeout_s=300.0: (_peaks(), None))
    mp.setattr(session, "_child_env", child_env)
    try:
        outcome = session.profile_task(
            load_task(SIN), Settings(run_dir=str(tmp_path / "run")),
            session.ProfileOptions(case_id="small", known_time_ms=0.0202, device_name="H100 (stand-in)",
                                   capability="9.0", perf_inputs_dir=tmp_path / "perf-inputs"))
    finally:
        mp.undo()
    assert outcome.time_us == pytest.approx(20.2) and outcome.device_name == "H100 (stand-in)"
    assert outcome.profile.source == "ncu" and outcome.profile.roofline.time_us == pytest.approx(20.2)
    assert envs and set(envs) == {str(tmp_path / "perf-inputs")}
    steps = dict(outcome.profile.step_s)            # apart from the notes a prompt shows
    assert {"ncu", "static compile"} <= set(steps) and all(v >= 0 for v in steps.values())
    assert not any(n.startswith(session.STEP_NOTE) for n in outcome.profile.notes)


def test_the_static_compile_is_bounded_by_the_profile_option(tmp_path):
    """The static compile gets ``static_timeout_s`` (the loop passes its profile's share of the
    record's budget); a compile that runs out leaves error stats and the profile goes on."""
    from tritonforge.config import Settings
    from tritonforge.model import CompileStats as Stats

    seen = []

    def slow_compile(requests, *, isolate=None, timeout_s=600.0, workers=1, children=()):
        seen.append(timeout_s)
        return [Stats(kernel=r.kernel_name, target="cuda:90", num_warps=r.num_warps,
                      num_stages=r.num_stages, error="compile child failed: timed out")
                for r in requests]

    mp = pytest.MonkeyPatch()
    mp.setattr(session, "compile_many", slow_compile)
    try:
        outcome = session.profile_task(load_task(SIN), Settings(run_dir=str(tmp_path / "run"), device="cpu"),
                                       session.ProfileOptions(static_timeout_s=7.0))
    finally:
        mp.undo()
    assert seen == [7.0]
    assert outcome.profile.compile_stats and all(s.error for s in outcome.profile.compile_stats)


# ---- the pieces -----------------------------------------------------------------------------

def test_bad_inputs_give_clear_errors(tmp_path, capsys):
    run = ["--device", "cpu", "--run-dir", str(tmp_path)]
    assert cli.main(["profile", *run]) == 2
    assert "give a kernel FILE or --tritonbench NAME" in capsys.readouterr().err
    assert cli.main(["profile", str(tmp_path / "nope.py"), *run]) == 2
    assert "nope.py" in capsys.readouterr().err
    assert cli.main(["profile", str(SIN), "--case", "huge", *run]) == 2
    err = capsys.readouterr().err
    assert "no case 'huge'" in err and "perf-16M" in err
    assert not (tmp_path / "profile.json").exists()


def test_choose_case():
    task = load_task(SIN)
    assert session.choose_case(task, None, {})[0].id == "perf-16M"
    case, why = session.choose_case(task, None, {"perf-1M": 2.0, "perf-16M": 1.0, "small": 9.0})
    assert case.id == "perf-1M" and "slowest" in why
    assert session.choose_case(task, "odd", {})[0].id == "odd"


def test_launch_requests_dedupe_and_refuse_what_they_cannot_describe():
    t = TensorInfo("torch.float32", (64,), 256, True)
    same = CapturedLaunch("add_kernel", str(ADD), (t, t, t, 64), (("BLOCK_SIZE", 4096), ("num_warps", 8)))
    odd = CapturedLaunch("add_kernel", str(ADD), (t, Unsupported("Desc", "Desc()"), t, 64),
                         (("BLOCK_SIZE", 4096),))
    nowhere = CapturedLaunch("k", None, (), ())
    requests, failed = session.launch_requests([same, same, odd, nowhere], 90)
    assert len(requests) == 1
    r = requests[0]
    assert (r.kernel_name, r.num_warps, r.num_stages, r.target) == ("add_kernel", 8, 3, ("cuda", 90, 32))
    assert dict(r.signature.constexprs) == {"BLOCK_SIZE": 4096}
    assert dict(r.signature.types)["x_ptr"] == "*fp32"
    assert [f.error.split(":")[0] for f in failed] == ["TypeError", "the kernel is not defined in a file"]


def test_capture_round_trip(tmp_path):
    import torch

    x = torch.zeros(10)
    launch = CapturedLaunch("k", "/x.py", (x, x[1:], 3, 2.5, float("inf"), None, (1, 2), object()),
                            (("BLOCK", 16), ("num_warps", 4)), (5, 1))
    cap = standalone.LaunchCapture("t", "c", "cpu", 2, (launch, launch), 7, 1e6, None)
    path = tmp_path / "cap.json"
    path.write_text(json.dumps(standalone.capture_to_json(cap)))
    back = standalone.read_capture(path)
    (a, b, n, f, inf, none, tup, obj) = back.launches[0].args
    assert a == TensorInfo("torch.float32", (10,), 40, True)
    assert b.shape == (9,) and b.aligned is False                       # offset by 4 bytes
    assert (n, f, inf, none, tup) == (3, 2.5, float("inf"), None, (1, 2))
    assert isinstance(obj, Unsupported) and obj.type_name == "object"
    assert back.launches_per_call == 1 and back.one_call == back.launches[1:]
    assert back.launches[0].kwarg("BLOCK") == 16 and back.launches[0].grid == (5, 1)
    assert (back.warmup_launches, back.declared_bytes, back.declared_flops) == (7, 1e6, None)


def test_accounting_on_the_recorded_copy_reaches_the_roofline():
    """H200 'copy' (y = x + 1, 2^28 fp32): ncu bytes with pending stores, 531 us timed."""
    kernels = parse_raw_csv((FIXTURES / "h200_copy_raw.csv").read_text())
    stats = json.loads((FIXTURES / "h200_stats.json").read_text())["copy"]
    cs = CompileStats(**{k: v for k, v in stats.items()
                         if k in CompileStats.__dataclass_fields__ and k != "constexprs"},
                      constexprs=tuple(tuple(c) for c in stats["constexprs"]))
    work = accounting.call_work(kernels, [cs], (), None)
    assert work.bytes_moved == pytest.approx(2 * 2**30, rel=0.01)
    assert work.flops == 2**28 and "Nsight Compute" in work.basis
    roof = place(work.bytes_moved, work.flops, stats["time_us"], _peaks(), compute="fp32")
    assert roof.bound is Bound.MEMORY and roof.fraction_of_peak > 0.9
    p = build_profile("copy", "record", kernels=kernels, stats=[cs], roofline=roof,
                      time_us=stats["time_us"], launches_per_call=1)
    assert p.diagnosis.near_roofline and p.diagnosis.hints[0].kind == "near_roofline"


def test_estimated_bytes_follow_loads_and_stores():
    analysis = analyze_source(ADD.read_text())
    t = TensorInfo("torch.float32", (1000,), 4000, True)
    launch = CapturedLaunch("add_kernel", str(ADD), (t, t, t, 1000), (("BLOCK_SIZE", 4096),))
    assert accounting.estimated_bytes([launch], analysis) == 12000          # 2 reads + 1 write
    assert accounting.estimated_bytes([launch], None) == 12000              # every tensor once
    bf16 = CompileStats("add_kernel", "cuda:90", 4, 3, uses_tensor_cores=True)
    wide = CapturedLaunch("add_kernel", None, (TensorInfo("torch.bfloat16", (8,), 16, True),), ())
    assert accounting.compute_kind([bf16], [wide]) == "bf16"
    assert accounting.compute_kind([], [launch]) == "fp32"
    assert accounting.call_work((), (), (), None) is None


def test_vector_add_example_loads():
    task = load_task(ADD)
    (perf,) = task.performance_cases
    assert perf.recipe.args[0].shape == (2**28,)
    analysis = analyze_source(task.source)
    assert [k.name for k in analysis.kernels] == ["add_kernel"]
    assert "BLOCK_SIZE = 4096" in task.source and "num_warps=8" in task.source


def test_standalone_refuses_an_unknown_case(tmp_path):
    import subprocess

    from tritonforge.model.serialize import dumps
    (tmp_path / "task.json").write_text(dumps(load_task(SIN)))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-m", "tritonforge.runtime.standalone", "--task-file",
                           str(tmp_path / "task.json"), "--case", "nope"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "no case 'nope'" in done.stderr and "perf-16M" in done.stderr
