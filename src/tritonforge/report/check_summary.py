"""Summaries of ``tritonforge check`` (``ci_check.CheckReport``) for CI systems: JUnit XML (one
test case per kernel case; a mismatch or regression is a failure) and Markdown (a table for a
pull-request comment or a job summary)."""

from __future__ import annotations

from xml.sax.saxutils import quoteattr, escape


def _ratio(c) -> str:
    return "-" if c.ratio is None else f"{c.ratio:.3f}x ({c.low:.3f}x-{c.high:.3f}x)"


def to_junit(report) -> str:
    cases, failures, skipped = [], 0, 0
    for k in report.kernels:
        if k.failure:
            failures += 1
            cases.append(f'  <testcase classname={quoteattr(k.name)} name="kernel">'
                         f"<failure message={quoteattr(k.failure)}/></testcase>")
        for c in k.cases:
            body = ""
            if c.status in ("mismatch", "regression", "failed"):
                failures += 1
                body = f"<failure message={quoteattr(f'{c.status}: {c.detail}')}/>"
            elif c.status == "skipped":
                skipped += 1
                body = f"<skipped message={quoteattr(c.detail or k.timing_note)}/>"
            cases.append(f"  <testcase classname={quoteattr(k.name)} name={quoteattr(c.case_id)}>"
                         f"{body}</testcase>")
    notes = "; ".join(sorted({k.timing_note for k in report.kernels if k.timing_note}))
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            f'<testsuite name="tritonforge check" tests="{len(cases)}" failures="{failures}" '
            f'skipped="{skipped}">\n'
            f"  <properties><property name=\"device\" value={quoteattr(report.device)}/>"
            f"<property name=\"note\" value={quoteattr(notes)}/></properties>\n"
            + "\n".join(cases) + "\n</testsuite>\n")


def to_markdown(report) -> str:
    verdict = "passed" if report.ok else "FAILED"
    lines = [f"## tritonforge check: {verdict}", "",
             f"device: {escape(report.device)}; noise bound {report.noise:.0%}", ""]
    for note in sorted({k.timing_note for k in report.kernels if k.timing_note}):
        lines += [f"> {note}", ""]
    lines += ["| kernel | case | status | speedup vs recorded (95% interval) | detail |",
              "|---|---|---|---|---|"]
    for k in report.kernels:
        if k.failure:
            lines.append(f"| {k.name} | - | failed | - | {k.failure} |")
        for c in k.cases:
            lines.append(f"| {k.name} | {c.case_id} | {c.status} | {_ratio(c)} | "
                         f"{c.detail.replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"
