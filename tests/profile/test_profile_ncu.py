"""Building ncu command lines, and run_ncu's statuses, with small fake ncu scripts."""

import stat
import sys
import time
from pathlib import Path

import pytest

from tritonforge.errors import EnvironmentProblem
from tritonforge.profile import ncu as ncu_mod
from tritonforge.profile.ncu import (
    NcuRequest,
    NcuStatus,
    build_ncu_command,
    kernel_regex,
    profile_with_ncu,
    read_ncu_report,
    run_ncu,
)

PY = [sys.executable, "-m", "tritonforge.runtime.standalone", "--case", "perf-0"]


def test_build_ncu_command_narrows_and_keeps_clocks():
    cmd = build_ncu_command(PY, kernel_regex(["sin_kernel", "my.kernel"]), 3, 2,
                            ["gpu__time_duration.sum", "dram__bytes_read.sum"], out_csv="/tmp/x.csv",
                            ncu_path="/opt/ncu")
    assert cmd[0] == "/opt/ncu"
    assert cmd[-len(PY):] == PY                                   # the program comes last
    args = cmd[1:-len(PY)]
    assert args[args.index("--clock-control") + 1] == "none"
    assert args[args.index("--kernel-name") + 1] == r"regex:^(sin_kernel|my\.kernel)$"
    assert args[args.index("--launch-skip") + 1] == "3" and args[args.index("--launch-count") + 1] == "2"
    assert args[args.index("--metrics") + 1] == "gpu__time_duration.sum,dram__bytes_read.sum"
    assert args[args.index("--log-file") + 1] == "/tmp/x.csv"
    assert {"--csv", "raw"} <= set(args)


def test_build_ncu_command_defaults():
    cmd = build_ncu_command(PY, None, nvtx_include="tritonforge/", clock_control="base", ncu_path="ncu")
    assert "--kernel-name" not in cmd and cmd[cmd.index("--nvtx-include") + 1] == "tritonforge/"
    assert cmd[cmd.index("--clock-control") + 1] == "base"
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert "gpu__time_duration.sum" in metrics and len(metrics) > 30
    with pytest.raises(ValueError):
        build_ncu_command(PY, None, launch_count=0)


def fake_ncu(tmp_path: Path, body: str) -> str:
    path = tmp_path / "ncu"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _cmd(ncu: str, out_csv: str | None = None) -> list[str]:
    return build_ncu_command(["true"], "^k$", 0, 1, ["gpu__time_duration.sum"], out_csv=out_csv,
                             ncu_path=ncu)


def test_ncu_missing():
    r = run_ncu(["/nonexistent/ncu", "--csv"], timeout_s=5)
    assert r.status is NcuStatus.NCU_MISSING and "TRITONFORGE_NCU" in r.message and not r.ok


def test_permission_error_says_how_to_fix(tmp_path):
    ncu = fake_ncu(tmp_path, 'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission '
                             'to access NVIDIA GPU Performance Counters"; exit 1')
    r = run_ncu(_cmd(ncu), timeout_s=10)
    assert r.status is NcuStatus.PERMISSION
    assert "NVreg_RestrictProfilingToAdminUsers=0" in r.message and "root" in r.message


def test_timeout_kills_the_process_group(tmp_path):
    marker = tmp_path / "child.pid"
    ncu = fake_ncu(tmp_path, f"sleep 30 & echo $! > {marker}; wait")
    start = time.monotonic()
    r = run_ncu(_cmd(ncu), timeout_s=1)
    assert r.status is NcuStatus.TIMEOUT and time.monotonic() - start < 15
    assert "raise the timeout" in r.message
    child = int(marker.read_text())
    time.sleep(0.2)
    assert not _alive(child)                          # the grandchild died with the group


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")                    # a zombie waits for a reaper, it is dead


def test_ok_reads_the_log_file(tmp_path, fixtures_dir):
    out = tmp_path / "raw.csv"
    src = fixtures_dir / "h200_sin_basic_raw.csv"
    ncu = fake_ncu(tmp_path, f'echo "program output"; cp {src} {out}')
    r = run_ncu(_cmd(ncu, str(out)), timeout_s=10)
    assert r.ok and r.status is NcuStatus.OK
    assert [k.kernel for k in r.kernels] == ["sin_kernel", "sin_kernel"] and r.csv_path == str(out)


def test_no_kernels_and_failures(tmp_path):
    none = fake_ncu(tmp_path, 'echo "==PROF== Disconnected"; echo "==WARNING== No kernels were profiled."')
    assert run_ncu(_cmd(none), timeout_s=10).status is NcuStatus.NO_KERNELS
    fail = fake_ncu(tmp_path, 'echo "==ERROR== Failed to find metric foo__bar"; exit 1')
    r = run_ncu(_cmd(fail), timeout_s=10)
    assert r.status is NcuStatus.FAILED and "foo__bar" in r.message and r.returncode == 1


def test_profile_with_ncu_without_ncu(monkeypatch):
    monkeypatch.setattr(ncu_mod, "find_ncu", lambda: None)
    r = profile_with_ncu(NcuRequest(python_cmd=("true",), kernel_names=("k",)))
    assert r.status is NcuStatus.NCU_MISSING and "static stats" in r.message


def test_read_ncu_report_without_any_reader(monkeypatch, fixtures_dir):
    monkeypatch.setattr(ncu_mod, "ncu_report_available", lambda: False)
    monkeypatch.setattr(ncu_mod, "find_ncu", lambda: None)
    with pytest.raises(EnvironmentProblem, match="ncu --import"):
        read_ncu_report(str(fixtures_dir / "h200_softmax_full.ncu-rep"))
    with pytest.raises(EnvironmentProblem, match="no such"):
        read_ncu_report("/nonexistent.ncu-rep")


@pytest.mark.gpu
def test_run_ncu_for_real(tmp_path):
    if ncu_mod.find_ncu() is None:
        pytest.skip("ncu not installed")
    script = tmp_path / "work.py"
    script.write_text(
        "import torch\nx = torch.randn(1 << 24, device='cuda')\n"
        "for _ in range(3):\n    y = x * 2\ntorch.cuda.synchronize()\n")
    r = profile_with_ncu(NcuRequest(python_cmd=(sys.executable, str(script)), launch_skip=1,
                                    launch_count=1, timeout_s=300), workdir=str(tmp_path))
    assert r.status in (NcuStatus.OK, NcuStatus.PERMISSION), r.output_tail
    if r.ok:
        assert len(r.kernels) == 1 and r.kernels[0].duration_us > 0
        assert r.kernels[0].get("dram_throughput_pct") is not None


def test_profile_with_ncu_retries_without_unknown_metrics(tmp_path, monkeypatch, fixtures_dir):
    src = fixtures_dir / "h200_sin_basic_raw.csv"
    # fails while the metric list holds bogus__metric.sum, else writes the CSV to --log-file
    ncu = fake_ncu(tmp_path, f'''
case "$*" in *bogus__metric.sum*) echo "==ERROR== Failed to find metric bogus__metric.sum"; exit 1;; esac
while [ "$1" != "--log-file" ]; do shift; done
cp {src} "$2"''')
    monkeypatch.setattr(ncu_mod, "find_ncu", lambda: ncu)
    r = profile_with_ncu(NcuRequest(python_cmd=("true",), kernel_names=("sin_kernel",),
                                    metrics=("gpu__time_duration.sum", "bogus__metric.sum")),
                         workdir=str(tmp_path))
    assert r.ok and len(r.kernels) == 2 and "bogus__metric.sum" in r.message
    assert "bogus__metric.sum" not in " ".join(r.command)


@pytest.mark.gpu
def test_report_readers_agree(fixtures_dir, monkeypatch):
    if not ncu_mod.ncu_report_available() or ncu_mod.find_ncu() is None:
        pytest.skip("needs Nsight Compute (ncu and its ncu_report module)")
    rep = str(fixtures_dir / "h200_softmax_full.ncu-rep")
    via_module = read_ncu_report(rep)
    monkeypatch.setattr(ncu_mod, "ncu_report_available", lambda: False)
    via_import = read_ncu_report(rep)
    assert [k.kernel for k in via_module] == [k.kernel for k in via_import] and via_module
    for a, b in zip(via_module, via_import):
        assert a.duration_us == pytest.approx(b.duration_us, rel=1e-3)
        for name in ("dram_throughput_pct", "achieved_occupancy_pct", "registers_per_thread"):
            assert a.get(name) == pytest.approx(b.get(name), rel=1e-2), name
