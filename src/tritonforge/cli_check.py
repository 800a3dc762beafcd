"""The CLI's ``check`` command (for CI in users' repositories): its arguments and its run. The
work is ``ci_check``'s; the summaries are ``report.check_summary``'s."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .model.serialize import to_jsonable
from .report.check_summary import to_junit, to_markdown

# ``ci_check`` and ``api`` are imported inside ``run_check``: they import torch, and the CLI imports
# this module for ``--help``, which must stay torch-free (see ``cli``).

EXIT_OK, EXIT_FAILED = 0, 1


def add_check_parser(sub, common, fraction) -> None:
    chk = sub.add_parser(
        "check", help="CI: verify kernels against a recorded baseline, fail on a regression",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Verify each kernel file against its source recorded in a baseline file and, "
                    "on a GPU, time both side by side; exit 1 on any mismatch or on a case "
                    "slower beyond the noise bound. On the CPU interpreter only correctness is "
                    "checked.",
        epilog="examples:\n"
               "  tritonforge check kernels/*.py --baseline tf-baseline.json --record   record\n"
               "  tritonforge check kernels/*.py --baseline tf-baseline.json --junit tf.xml\n\n"
               "exit codes: 0 all verified, none slower; 1 a mismatch, failure or regression; "
               "2 bad input (no baseline file, unknown kernel); 3 missing tool or device")
    chk.add_argument("files", nargs="+", metavar="FILE", help="kernel .py files (each with its spec)")
    chk.add_argument("--baseline", required=True, help="the baseline JSON file")
    chk.add_argument("--record", action="store_true",
                     help="write the baseline from the files as they are now, instead of checking")
    chk.add_argument("--noise", type=fraction, default=None,
                     help="a case is a regression when slower by more than this share, with 95%% "
                          "confidence (default 0.05)")
    chk.add_argument("--junit", help="also write a JUnit XML summary here")
    chk.add_argument("--markdown", help="also write a Markdown summary here")
    common(chk)


def run_check(args: argparse.Namespace, settings) -> int:
    from . import ci_check
    from .api import check_writable_dir, load_task

    run_dir = check_writable_dir(settings.run_dir, "--run-dir")
    for flag, path in (("--junit", args.junit), ("--markdown", args.markdown)):
        if path:
            check_writable_dir(Path(path).parent if str(Path(path).parent) else ".", flag)
    if not args.record:
        ci_check.read_baseline(args.baseline)          # a missing baseline fails before any run
    tasks = [(load_task(f), f, None) for f in args.files]
    if args.record:
        kept = ci_check.record(tasks, settings, args.baseline, run_dir)
        timed = sum(1 for k in kept for c in k.cases if c.samples_ms)
        print(f"baseline written: {args.baseline} ({len(kept)} kernel(s), {timed} timed case(s))")
        return EXIT_OK
    report = ci_check.check(tasks, settings, args.baseline, run_dir,
                            noise=args.noise if args.noise is not None else ci_check.DEFAULT_NOISE)
    text = to_markdown(report)
    if args.junit:
        Path(args.junit).write_text(to_junit(report))
    if args.markdown:
        Path(args.markdown).write_text(text)
    print(json.dumps(to_jsonable(report), indent=1) if args.json else text)
    return EXIT_OK if report.ok else EXIT_FAILED
