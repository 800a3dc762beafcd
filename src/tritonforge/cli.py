"""The command line: parse, call ``api``/``bench``, print, map errors to exit codes.

The user-facing text (``tritonforge --help``) is ``DESCRIPTION`` and ``EPILOG`` below.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
from pathlib import Path
from typing import Sequence

from . import __version__
from .bench.options import (
    MAX_COPIES, BaselineOptions, IsolationOptions, PassOptions, ReverifyOptions, SelfcheckOptions,
)
from .cli_check import add_check_parser, run_check
from .cli_progress import progress_display
from .config import load_settings
from .errors import ConfigError, EnvironmentProblem, InputError, TritonForgeError
from .model import CaseRole, Status
from .model.serialize import to_jsonable
from .profile.render import render_profile
from .report.tables import fmt_ms, render_table
from .runtime.hardware import resolve_device
from .search.cases import INTERPRETER_MAX_ROUNDS
from .testgen.render import summary as testgen_summary

# Imported inside the command functions: api, bench.commands, testgen.generate, llm.testgen_run.
# They import torch (1 to 2 s on a CPU machine with torch 2.13; `tritonforge --help` takes 0.14 s
# without it), which --help does not need and _check_required_packages must report missing first.

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130

DESCRIPTION = """Make Triton kernels faster, verified: TritonForge times a kernel file's launcher,
proposes rewritten variants, proves each computes what the original computes, times it against the
original, and keeps what is faster. Without a GPU, kernels run through Triton's interpreter
(correctness only)."""

EPILOG = """examples:
  tritonforge optimize src/tritonforge/examples/sin_block4.py      the main job, on a bundled example
  tritonforge optimize kernel.py --budget 300 --out faster/        at most 5 minutes, outputs in faster/
  tritonforge run kernel.py                                        run the cases once, print a table
  tritonforge testgen kernel.py                                    write kernel.toml from the file's test
  tritonforge check kernel.py --baseline tf-baseline.json          CI: re-verify, fail on a regression
  tritonforge verify kernel.py faster.py                           the search's checks on a kernel handed to you
  tritonforge COMMAND --help                                       every flag of one command

exit codes:
  0 ok   1 the kernel failed a case (or the original fails every case)   2 bad input or setting
  3 missing tool, package or device   4 worker failure   5 run-store problem
  130 interrupted (run the same command again to resume)

docs: README.md, docs/API.md (Python API), docs/BENCHMARK.md (how figures are measured)"""

# Checked here, before anything starts: torch and triton are needed by every command but
# `bench list`, and a missing one would otherwise surface as a traceback deep in a worker.
_REQUIRED = (("torch", "torch>=2.11,<2.14"), ("triton", "triton>=3.6,<3.8"))


def _fraction(text: str) -> float:
    """An argparse type: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1")
    return value


def _copies(text: str) -> int:
    """An argparse type: how many copies of the original a selfcheck times (2 to 8)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 2 <= value <= MAX_COPIES:
        raise argparse.ArgumentTypeError(f"{value} is not from 2 to {MAX_COPIES}")
    return value


def _positive(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not above 0 (give seconds, e.g. 300)")
    return value


def _count(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1 (give 1 or more)")
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default=None,
                        help="where kernels run (default auto: cuda if visible, else the CPU "
                             "interpreter)")
    parser.add_argument("--run-dir", default=None, help="run directory (store, logs, outputs)")
    parser.add_argument("--config", default=None, help="a tritonforge.toml settings file")
    parser.add_argument("--timeout", type=_positive, default=None, dest="case_timeout_s",
                        help="seconds without progress before a kernel is killed")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("-v", "--verbose", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tritonforge", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tritonforge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="evaluate a kernel file's cases and print a table")
    run.add_argument("file", nargs="?", help="the kernel .py file")
    run.add_argument("--spec", help="case spec (default: FILE with .toml)")
    run.add_argument("--entry", help="entry function (overrides the spec's)")
    run.add_argument("--tritonbench", metavar="NAME", help="a TritonBench-G record instead of FILE")
    run.add_argument("--perf", action="store_true", default=None,
                     help="also run performance cases on the CPU interpreter (slow; not performance)")
    run.add_argument("--cases", help="comma-separated case ids")
    _common(run)

    opt = sub.add_parser(
        "optimize", help="make a kernel file faster, verified (the main job)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Time the kernel file's launcher, propose rewritten variants, verify each "
                    "against the original, time it, keep what is faster; writes the faster file, "
                    "a diff and report.{json,md,html} under --out (default RUN_DIR/output).",
        epilog="examples:\n"
               "  tritonforge optimize src/tritonforge/examples/sin_block4.py\n"
               "  tritonforge optimize kernel.py --spec cases.toml --budget 300 --out faster/\n"
               "  tritonforge optimize --tritonbench softmax_triton1 --device cuda\n\n"
               "exit codes: 0 done (faster or not: the output says which); 1 the original "
               "fails every case; 2 bad input; 3 missing package, tool or device; 4 worker "
               "failure; 5 run-store problem; 130 interrupted (run it again to resume)")
    opt.add_argument("file", nargs="?", help="the kernel .py file")
    opt.add_argument("--spec", help="case spec (default: FILE with .toml)")
    opt.add_argument("--entry", help="entry function (overrides the spec's)")
    opt.add_argument("--tritonbench", metavar="NAME", help="a TritonBench-G record instead of FILE")
    opt.add_argument("--rounds", type=_count, default=None, dest="max_rounds",
                     help="at most this many rounds (default 8; 2 on the CPU interpreter)")
    opt.add_argument("--budget", type=_positive, default=None,
                     help="seconds for the whole run: no search round starts that would, with "
                          "the final check's estimated time, end past it (default: no limit)")
    opt.add_argument("--jobs", type=_count, default=2, help="verification workers side by side")
    opt.add_argument("--emit", choices=["auto", "fixed", "autotune"], default=None,
                     help="write the best config fixed in the code, or an @triton.autotune over "
                          "the best few configs; auto (default): fixed, unless the best fixed "
                          "config is faster overall but slower on some size, then an autotune "
                          "over it and the original's config")
    opt.add_argument("--out", help="where the faster file, diff and reports go "
                                   "(default RUN_DIR/output)")
    _common(opt)

    tg = sub.add_parser("testgen", help="build correctness and performance cases from a kernel "
                                         "file's own test or example, and write them as a spec")
    tg.add_argument("file", help="the kernel .py file")
    tg.add_argument("--entry", help="entry function(s), comma-separated (default: the functions "
                                    "the test calls that launch kernels)")
    tg.add_argument("--test", help="a separate test or example file that calls the entry "
                                   "(default: the file's test_* functions, else its __main__ block)")
    tg.add_argument("--out", help="spec file to write (default: FILE with .toml)")
    tg.add_argument("--force", action="store_true", help="replace an existing spec file")
    tg.add_argument("--perf-mb", type=float, default=64.0,
                    help="scale performance sizes until one call moves this many MB (default 64)")
    tg.add_argument("--perf-us", type=float, default=50.0,
                    help="... or, on a GPU, runs this many microseconds (default 50)")
    tg.add_argument("--set", action="append", default=[], metavar="SIZE=VALUE",
                    help="fix a size in the performance cases (names as printed), repeatable")
    tg.add_argument("--no-perf", action="store_true", help="correctness cases only")
    tg.add_argument("--llm", action="store_true",
                    help="ask the configured LLM for the cases instead of tracing the file's test "
                         "(each case is still run on the original; see docs/LLM.md)")
    tg.add_argument("--no-validate", action="store_true",
                    help="do not run the original on the cases (not recommended)")
    tg.add_argument("--no-stability", action="store_true",
                    help="skip running the original against itself on the correctness cases")
    tg.add_argument("--trace-timeout", type=float, default=180.0,
                    help="seconds the file's own test may run (default 180)")
    _common(tg)

    prof = sub.add_parser("profile", help="profile one case: static stats, Nsight Compute "
                                           "metrics, roofline position and diagnosis")
    prof.add_argument("file", nargs="?", help="the kernel .py file")
    prof.add_argument("--spec", help="case spec (default: FILE with .toml)")
    prof.add_argument("--entry", help="entry function (overrides the spec's)")
    prof.add_argument("--tritonbench", metavar="NAME", help="a TritonBench-G record instead of FILE")
    prof.add_argument("--case", dest="case_id",
                      help="the case to profile (default: the slowest performance case by the "
                           "original's GPU time, else the last performance case)")
    prof.add_argument("--no-ncu", action="store_true",
                      help="do not run Nsight Compute (timing + static stats only)")
    prof.add_argument("--ncu-timeout", type=float, default=300.0,
                      help="seconds Nsight Compute may take (default 300)")
    prof.add_argument("--out", help="write the profile JSON here (default RUN_DIR/profile.json)")
    _common(prof)

    add_check_parser(sub, _common, _fraction)

    ver = sub.add_parser("verify", help="check a faster kernel against its original, as the search "
                                        "does (exit 0 accepted, 1 rejected, 2 bad input)")
    ver.add_argument("original", help="the original kernel .py file (the oracle)")
    ver.add_argument("candidate", help="the candidate .py file to check")
    ver.add_argument("--spec", help="case spec (default: ORIGINAL with .toml, else testgen's cases)")
    ver.add_argument("--entry", help="entry function (overrides the spec's)")
    _common(ver)

    bench = sub.add_parser("bench", help="benchmark suites")
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    base = bsub.add_parser("baseline", help="runnable check + baseline times for TritonBench-G")
    base.add_argument("--names", help="comma-separated record names (default: all)")
    base.add_argument("--budget", type=float, default=None, help="stop after this many seconds")
    base.add_argument("--out", help="write the summary JSON here")
    base.add_argument("--jobs", type=int, default=1,
                      help="workers side by side for the untimed runnable check (timing is alone)")
    base.add_argument("--alone-memory-gb", type=float, default=0.0,
                      help="host memory limit of the worker that times alone and retries what ran "
                           "out of memory beside others (default: 70%% of the machine's)")
    base.add_argument("--rewarm-share", type=_fraction, default=0.25,
                      help="share of the budget for checking again, side by side, records an "
                           "earlier process checked (Triton's cache is gone with it; default 0.25)")
    _common(base)
    selfc = bsub.add_parser("selfcheck", help="time the original against itself (noise floor)")
    selfc.add_argument("--names", help="comma-separated record names")
    selfc.add_argument("--out", help="write the summary JSON here")
    selfc.add_argument("--copies", type=_copies, default=2,
                       help="copies of the original timed side by side in one request, as a "
                            "search round times its candidates (2 to 8; default 2)")
    _common(selfc)
    bopt = bsub.add_parser("optimize", help="one optimization pass over TritonBench-G records, "
                           "every GPU of the host (or a Ray cluster), resumable (docs/BENCHMARK.md)")
    bopt.add_argument("--names", help="comma-separated record names (default: --names-file, else "
                                      "every runnable record of --baseline-store)")
    bopt.add_argument("--names-file", default="", help="a file of record names, one a line")
    bopt.add_argument("--kernel", action="append", default=[], metavar="PATH[=SPEC]",
                      help="a kernel file (and its spec) as a record of the pass (repeatable)")
    bopt.add_argument("--baseline-store", default=".gpu-store/baseline/store.sqlite",
                      help="run store of a baseline sweep: its runnable records, and their case times")
    bopt.add_argument("--no-sweep-times", action="store_true",
                      help="time each original again instead of taking its case times from the "
                           "baseline store (they only choose the search's cases)")
    bopt.add_argument("--size", type=int, default=0,
                      help="only the subset rule's first SIZE runnable records (default: all)")
    bopt.add_argument("--budget", type=float, default=None,
                      help="stop after this many seconds: no record starts without its whole "
                           "per-kernel budget left, and the running ones are cut at the end")
    bopt.add_argument("--per-kernel", type=float, default=150.0,
                      help="seconds per kernel: no search round starts that would, with the "
                           "final check's estimated time, end past it")
    bopt.add_argument("--jobs", type=int, default=4, help="verification workers per GPU")
    bopt.add_argument("--gpus", default="", help="comma-separated GPUs to use (default: every "
                                                "visible GPU; one record per GPU at a time)")
    bopt.add_argument("--executor", choices=("local", "ray"), default="local",
                      help="local: one lane process per GPU of this host; ray: Ray tasks of one "
                           "GPU each (pip install 'tritonforge[ray]')")
    bopt.add_argument("--address", default="", help="with --executor ray: the cluster's address")
    bopt.add_argument("--ray-num-gpus", type=int, default=0,
                      help="with --executor ray and no --address: GPUs of the local cluster")
    bopt.add_argument("--records", default="bench/results/records.jsonl",
                      help="the pass's records, one JSON line each (resumed from, appended to)")
    bopt.add_argument("--latest", default="bench/results/LATEST.json",
                      help="where the pass's figures go (with PASS.md, its tables, beside it)")
    bopt.add_argument("--tables", default="", help="the Markdown tables (default: PASS.md beside --latest)")
    bopt.add_argument("--subset-file", default="bench/results/subset-40.txt",
                      help="the frozen subset LATEST.json gives its own figures")
    bopt.add_argument("--group-file", action="append", default=[],
                      help="a list of records LATEST.json and PASS.md give their own figures, "
                           "named by the file's stem (repeatable; e.g. bench/results/others-30.txt)")
    bopt.add_argument("--allow-mixed-engines", action="store_true",
                      help="keep records another engine or other settings made (the pass is "
                           "then marked not publishable)")
    bopt.add_argument("--redo", help="DEBUGGING: comma-separated records to run again although "
                                     "done (the pass is then marked not publishable)")
    bopt.add_argument("--out", help="the call's state as JSON, rewritten after each record")
    _common(bopt)
    rever = bsub.add_parser("reverify", help="re-verify a pass's accepted kernels: a fresh "
                            "process, fresh seeds, every case (LATEST.json's wrong_accepted)")
    rever.add_argument("--records", default="bench/results/records.jsonl")
    rever.add_argument("--names", help="comma-separated records (default: every accepted one "
                                       "not yet re-verified)")
    rever.add_argument("--kernel", action="append", default=[], metavar="PATH[=SPEC]",
                       help="kernel files the pass ran (as bench optimize --kernel)")
    rever.add_argument("--again", action="store_true", help="re-verify those already re-verified")
    rever.add_argument("--budget", type=float, default=None, help="stop after this many seconds")
    _common(rever)
    iso = bsub.add_parser("isolation", help="time records on one GPU alone and beside a busy "
                          "neighbour GPU (the per-GPU executor's premise; 2 GPUs)")
    iso.add_argument("--names", help="comma-separated record names")
    iso.add_argument("--gpus", default="0,1", help="the timed GPU, then the busy neighbour")
    iso.add_argument("--busy-cores", type=int, default=4,
                     help="host cores the neighbour keeps busy too, as a lane's compiles do (default 4)")
    iso.add_argument("--out", help="write the cases as JSON here")
    _common(iso)
    bsub.add_parser("list", help="list TritonBench-G record names")
    return parser


def _settings(args: argparse.Namespace):
    overrides = {"device": args.device, "run_dir": args.run_dir,
                 "case_timeout_s": args.case_timeout_s}
    settings = load_settings(args.config, overrides=overrides)
    # absolute: worker and tracing processes run in other working directories
    return settings.replace(run_dir=str(Path(settings.run_dir).expanduser().absolute()))


def _task_from_args(args: argparse.Namespace, command: str):
    """The task named on the command line: a kernel FILE (+ spec) or --tritonbench NAME."""
    from .api import load_task

    if not args.file and not args.tritonbench:
        raise InputError("give a kernel FILE or --tritonbench NAME",
                         hint=f"e.g. tritonforge {command} src/tritonforge/examples/sin_block4.py")
    if args.file and args.tritonbench:
        raise InputError("give either a kernel FILE or --tritonbench NAME, not both")
    return load_task(args.file, spec=args.spec, entry=args.entry, tritonbench=args.tritonbench)


def _cmd_run(args: argparse.Namespace) -> int:
    from .api import run_original

    settings = _settings(args)
    task = _task_from_args(args, "run")
    cases = tuple(c.strip() for c in args.cases.split(",")) if args.cases else None
    if cases:
        unknown = [c for c in cases if c not in {k.id for k in task.cases}]
        if unknown:
            raise InputError(f"unknown case ids: {', '.join(unknown)}",
                                   hint="known: " + ", ".join(c.id for c in task.cases))
    outcome = run_original(task, settings, with_performance=args.perf, case_ids=cases)
    result = outcome.evaluation.results[0]
    if args.json:
        print(json.dumps(to_jsonable(outcome.evaluation), indent=1))
        return EXIT_OK if result.status is Status.OK else EXIT_FAILED
    failures = {f.case_id: f for f in result.case_failures}
    rows = []
    ran = set(cases) if cases else {c.id for c in task.cases
                                    if not outcome.skipped_performance
                                    or c.role is CaseRole.CORRECTNESS}
    for case in task.cases:
        t = result.timing(case.id)
        if case.id not in ran:
            status = "skipped"
        elif result.failure is not None:
            status = result.failure.status.value
        elif case.id in failures:
            status = f"{failures[case.id].status.value}: {failures[case.id].reason[:60]}"
        else:
            status = "ok"
        rows.append((case.id, case.role.value, case.label[:40], status,
                     fmt_ms(t.median_ms) if t else "-",
                     f"{t.spread * 100:.1f}%" if t else "-",
                     t.method.value if t else "-"))
    dev = outcome.evaluation.device
    print(render_table(("case", "role", "inputs", "status", "median", "iqr/med", "timer"), rows,
                       title=f"{task.name} on {dev.name} (torch {dev.torch_version}, "
                             f"triton {dev.triton_version})"))
    if result.failure is not None:
        print(f"\nfailed: {result.failure.one_line()}\n{result.failure.detail[-1500:]}")
    if dev.interpreted:
        print("\nCPU mode: kernels ran through Triton's interpreter. Correctness is checked; "
              "timings are not performance figures"
              + (" and performance cases were skipped (use --perf to run them anyway)."
                 if outcome.skipped_performance else "."))
    print(f"store: {outcome.store_path}")
    return EXIT_OK if result.status is Status.OK else EXIT_FAILED


def original_fails(result) -> bool:
    """Whether the run stopped because the original itself fails (every case, or its baseline
    run): then there is nothing to be faster than, and the command exits 1."""
    return result.rounds == 0 and result.stop_reason.startswith(
        ("the original fails", "no case left that the original runs"))


def _cmd_optimize(args: argparse.Namespace) -> int:
    from .api import check_writable_dir, optimize

    settings = _settings(args)
    if args.max_rounds is not None:
        settings = settings.replace(max_rounds=args.max_rounds)
    if args.emit is not None:
        settings = settings.replace(emit=args.emit)
    check_writable_dir(settings.run_dir, "--run-dir")       # before any work: fail fast
    if args.out is not None:
        check_writable_dir(args.out, "--out")
    task = _task_from_args(args, "optimize")

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    device_kind = resolve_device(settings.device)
    if device_kind == "cpu" and (args.max_rounds or 0) > INTERPRETER_MAX_ROUNDS:
        say(f"note: {settings.max_rounds} rounds asked for; the CPU interpreter runs at most "
            f"{INTERPRETER_MAX_ROUNDS} (candidates are accepted by correctness alone there, so "
            "more rounds only repeat the loop slowly); run on a GPU for more")
    say(f"optimizing {task.name}: {len(task.correctness_cases)} correctness and "
        f"{len(task.performance_cases)} performance cases; run dir {settings.run_dir}")
    display = progress_display(sys.stderr)
    try:
        result, paths, device = optimize(task, settings, jobs=args.jobs, budget_s=args.budget,
                                         progress=display, out_dir=args.out)
    finally:
        display.close()
    if original_fails(result):
        print(json.dumps(to_jsonable(result), indent=1) if args.json else "", end="")
        why = "; ".join([result.stop_reason] + [n for n in result.notes if "original fails" in n])
        say(f"error: the original fails every case ({why[:400]}) (fix: the kernel or its spec; "
            f"`tritonforge run {args.file or '--tritonbench ' + str(args.tritonbench)}` shows "
            "each case)")
        return EXIT_FAILED
    if args.json:
        print(json.dumps(to_jsonable(result), indent=1))
    else:
        print(paths["markdown"].read_text())
        if result.best.source == result.original.source:
            print(f"no faster version found: the original is kept unchanged\n"
                  f"report: {paths['json']} (and report.html beside it)")
        else:
            print(f"faster file: {paths['best']}\ndiff: {paths['diff']}\n"
                  f"report: {paths['json']} (and report.html beside it)")
        if "cpu" in device:
            print("\nCPU mode: candidates were checked for correctness through Triton's "
                  "interpreter; nothing here says anything about speed. Run on a GPU for that.")
    return EXIT_OK


def _cmd_testgen(args: argparse.Namespace) -> int:
    if args.llm:
        return _cmd_testgen_llm(args)

    from .api import generate_cases
    from .testgen.generate import TestgenOptions

    fixed = []
    for item in args.set:
        name, _, value = item.partition("=")
        try:
            fixed.append((name.strip(), int(value)))
        except ValueError:
            raise TritonForgeError(f"--set {item!r}: expected SIZE=INTEGER",
                                   hint="e.g. --set x.0=16777216 (size names as testgen prints them)") from None
    options = TestgenOptions(perf_bytes=int(args.perf_mb * 2**20), perf_us=args.perf_us,
                             fixed=tuple(fixed), perf=not args.no_perf, validate=not args.no_validate,
                             stability=not args.no_stability, trace_timeout_s=args.trace_timeout)
    out = Path(args.out) if args.out else Path(args.file).with_suffix(".toml")
    entries = tuple(e.strip() for e in args.entry.split(",")) if args.entry else ()
    result = generate_cases(args.file, _settings(args), entries=entries, test=args.test, out=out,
                            overwrite=args.force, options=options)
    if args.json:
        print(json.dumps(to_jsonable(result), indent=1))
    else:
        print(testgen_summary(result, str(out) if result.spec_text else None))
        if result.spec_text:
            print(f"next: tritonforge run {args.file} --spec {out}")
    return EXIT_OK if result.spec_text else EXIT_FAILED


def _cmd_testgen_llm(args: argparse.Namespace) -> int:
    from .llm.testgen_run import llm_generate_cases

    settings = _settings(args)
    if not (settings.llm_model or settings.llm_replay):
        raise ConfigError("--llm needs a model", hint="set TRITONFORGE_LLM_MODEL (docs/LLM.md)")
    out = Path(args.out) if args.out else Path(args.file).with_suffix(".toml")
    if out.exists() and not args.force:
        raise InputError(f"{out} exists", hint="use --force to overwrite, or --out PATH")
    entries = tuple(e.strip() for e in args.entry.split(",")) if args.entry else ()
    outcome = llm_generate_cases(args.file, settings, entries=entries, out=out)
    if args.json:
        print(json.dumps(to_jsonable(outcome), indent=1))
    elif outcome.spec_text:
        print(f"{len(outcome.kept)} case(s) kept, {len(outcome.dropped)} dropped; spec: {out}")
        for d in outcome.dropped:
            print(f"  dropped {d.case_id}: {d.reason}")
    else:
        print(f"no spec: {outcome.reason}", file=sys.stderr)
    return EXIT_OK if outcome.spec_text else EXIT_FAILED


def _cmd_profile(args: argparse.Namespace) -> int:
    from .api import profile

    settings = _settings(args)
    task = _task_from_args(args, "profile")

    def say(text: str) -> None:
        if not args.json:
            print(text, file=sys.stderr, flush=True)

    outcome = profile(task, settings, case_id=args.case_id, use_ncu=not args.no_ncu,
                      out=args.out, ncu_timeout_s=args.ncu_timeout, progress=say)
    if args.json:
        print(json.dumps(to_jsonable(outcome.profile), indent=1))
    else:
        timed = (f", {outcome.time_us:,.1f} us per call" if outcome.time_us is not None else "")
        print(f"{task.name} on {outcome.device_name}{timed}, "
              f"{outcome.launches_per_call} launch(es) per call")
        print(render_profile(outcome.profile))
        print(f"profile: {outcome.json_path}\nstore: {outcome.store_path} "
              f"({outcome.wall_s:.1f} s)")
        if outcome.failure:
            print(f"\nthe original failed on case {outcome.profile.case_id}: {outcome.failure}")
    return EXIT_FAILED if outcome.failure else EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    from .api import verify_candidate

    verdict = verify_candidate(args.original, args.candidate, _settings(args), spec=args.spec,
                               entry=args.entry)
    if args.json:
        print(json.dumps(to_jsonable(verdict), indent=1))
    else:
        where = f"{len(verdict.cases)} cases from {'testgen: ' if verdict.generated else ''}" \
                f"{verdict.spec} on {verdict.device}"
        if verdict.accepted:
            print(f"accepted: {verdict.checked} case/seed pairs match the original ({where})")
        else:
            print(f"rejected ({where}):")
            for reason in verdict.reasons:
                print(f"  {reason.kind}: {reason.message}")
    return EXIT_OK if verdict.accepted else EXIT_FAILED


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import commands

    return commands.dispatch(args.bench_command, _bench_options(args),
                             _settings(args) if args.bench_command != "list" else None)


def _csv(text: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in (text or "").split(",") if n.strip())


def _bench_options(args: argparse.Namespace):
    """The typed options of a bench command (``bench.options``) from its flags."""
    c = args.bench_command
    if c == "baseline":
        return BaselineOptions(_csv(args.names), args.budget, args.out or "", args.jobs,
                               args.alone_memory_gb, args.rewarm_share)
    if c == "selfcheck":
        return SelfcheckOptions(_csv(args.names), args.out or "", args.copies)
    if c == "optimize":
        return PassOptions(
            names=_csv(args.names), names_file=args.names_file, kernels=tuple(args.kernel),
            baseline_store=args.baseline_store, no_sweep_times=args.no_sweep_times,
            size=args.size, budget_s=args.budget, per_kernel_s=args.per_kernel, jobs=args.jobs,
            redo=_csv(args.redo), gpus=_csv(args.gpus), executor=args.executor,
            address=args.address, ray_num_gpus=args.ray_num_gpus, records=args.records,
            latest=args.latest, tables=args.tables, subset_file=args.subset_file,
            group_files=tuple(args.group_file),
            allow_mixed_engines=args.allow_mixed_engines, out=args.out or "")
    if c == "reverify":
        return ReverifyOptions(args.records, _csv(args.names), tuple(args.kernel), args.again,
                               args.budget)
    if c == "isolation":
        return IsolationOptions(_csv(args.names), _csv(args.gpus), args.out or "", args.busy_cores)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        if not (args.command == "bench" and args.bench_command == "list"):
            _check_required_packages()
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "optimize":
            return _cmd_optimize(args)
        if args.command == "testgen":
            return _cmd_testgen(args)
        if args.command == "profile":
            return _cmd_profile(args)
        if args.command == "check":
            return run_check(args, _settings(args))
        if args.command == "bench":
            return _cmd_bench(args)
        if args.command == "verify":
            return _cmd_verify(args)
        parser.error(f"unknown command {args.command}")
    except TritonForgeError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted: everything finished so far is in the run store; run the same "
              "command again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK


def one_line(exc: TritonForgeError) -> str:
    """The error as one line: where, what, and the fix."""
    where = f"{exc.location}: " if exc.location else ""
    hint = f" (fix: {exc.hint})" if exc.hint else ""
    return f"{where}{exc.message}{hint}"


def _check_required_packages() -> None:
    for module, requirement in _REQUIRED:
        if importlib.util.find_spec(module) is None:
            raise EnvironmentProblem(
                f"{module} is not installed in this Python ({sys.executable})",
                hint=f"pip install '{requirement}' (or run `bash .ci/run` and use "
                     ".venv/bin/tritonforge)")


def entry() -> None:
    sys.exit(main())
