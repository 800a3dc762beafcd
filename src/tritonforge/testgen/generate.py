"""The test generator: from a kernel file and its own test to validated correctness and performance
cases, with no LLM.

    trace (subprocess) -> entries -> templates (shared sizes) -> cases -> validate (worker) -> spec

Correctness cases are the traced calls re-drawn under fresh seeds plus odd shapes derived from
them; performance cases scale the sizes that scale until one call moves ``perf_bytes`` (on a GPU:
or runs ``perf_us``), checked to run and, on a GPU, to take longer as they grow. Every case is run
on the original first; a case it fails on is dropped with the reason.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..config import Settings
from ..model import CaseRole, Task
from ..runtime.evaluator import Evaluator
from ..runtime.hardware import resolve_device
from .cases import (
    VARIETIES, Built, Unrepresentable, call_bytes, make_case, materialize, odd_values, shrink_hazard,
)
from .dims import Template, build_templates, leaves, pin, symbol_values
from .model import Dropped, GeneratedCase, Symbol, TestgenResult, Trace, TracedCall, TracedTensor
from .perf import choose_perf_cases
from .render import spec_text
from .trace import failure_kind, top_level_imports, trace_source
from .validate import check_layout, check_stable, run_original
from .values import learn

log = logging.getLogger(__name__)

MB = 1 << 20


@dataclass(frozen=True)
class TestgenOptions:
    """What to generate and how hard to check it (defaults: the issue's numbers)."""

    entries: tuple[str, ...] = ()            # default: functions the test calls that launch kernels
    driver: str = "auto"                     # auto | tests | main (a separate test file: section)
    perf_bytes: int = 64 * MB                # scale until one call moves this much ...
    perf_us: float = 50.0                    # ... or (GPU) runs this long
    fixed: tuple[tuple[str, int], ...] = ()  # sizes the user fixes for performance cases
    perf: bool = True
    seeds: int = 3
    max_traced: int = 8                      # traced calls kept per template ...
    max_odd: int = 10                        # odd-shape cases per template ...
    max_traced_total: int = 24               # ... and over all templates (many dtypes or flags)
    max_odd_total: int = 40
    variety: tuple[str, ...] = tuple(VARIETIES)   # value/layout variety cases per template
    big_bytes: int = 16 * MB                 # a case at 4x (else 2x) the sizes, if it moves no more
    probe_tied: bool = False                 # try sizes equal to a constexpr at an odd value too
    validate: bool = True
    stability: bool = True                   # verify the original against itself
    stability_max_s: float = 3.0             # CPU: skip it for cases whose one call takes longer
    stable_only: bool = False                # drop a case whose stability was not checked
    perf_on_cpu: bool = False                # run (never time) performance cases on the interpreter
    trace_timeout_s: float = 180.0
    budget_s: float | None = None            # validation time; cases left when it ends are dropped

    __test__ = False


def select_entries(trace: Trace, wanted: tuple[str, ...]) -> tuple[tuple[str, ...], list[TracedCall], list[str]]:
    """The entry functions and their calls: the outermost watched calls that launched kernels."""
    by_index = {c.index: c for c in trace.calls}
    notes = []
    raised = [c for c in trace.calls if c.error is not None]
    if raised:
        notes.append(f"{len(raised)} traced call(s) raised and were not used, e.g. "
                     f"{raised[0].function}: {raised[0].error[:150]}")

    def ancestors(call: TracedCall) -> list[str]:
        out, p = [], call.parent
        while p is not None and p >= 0 and p in by_index:
            out.append(by_index[p].function)
            p = by_index[p].parent
        if p == -1:
            out.append("?")
        return out

    usable = [c for c in trace.calls if c.error is None and c.n_launches > 0]
    if wanted:
        calls = [c for c in usable if c.function in wanted and c.function not in ancestors(c)]
        entries = tuple(w for w in wanted if any(c.function == w for c in calls))
        missing = [w for w in wanted if w not in entries]
        if missing:
            names = sorted({c.function for c in trace.calls})
            notes.append(f"no traced call of {', '.join(missing)} launched a kernel "
                         f"(traced functions: {', '.join(names) or 'none'})")
    else:
        calls = [c for c in usable if c.parent is None]
        counts: dict[str, int] = {}
        for c in calls:
            counts[c.function] = counts.get(c.function, 0) + c.repeats
        entries = tuple(sorted(counts, key=lambda f: -counts[f]))
    return entries, calls, notes


def expressible(call: TracedCall, params: tuple) -> bool:
    """Whether a spec can write ``call`` down (no module object, no unknown dtype, ...)."""
    names = {call.function: tuple(p.name for p in params)}
    try:
        (template,) = build_templates((call,), names)
        materialize(template, call, symbol_values(template, call), params)
    except Unrepresentable:
        return False
    return True


def descend_inexpressible(trace: Trace, entries: tuple[str, ...], calls: list[TracedCall]
                          ) -> tuple[tuple[str, ...], list[TracedCall], list[str]]:
    """Entries no call of which a spec can express (one takes a module object, say) are
    replaced by the watched calls they make that launch kernels (an autograd Function, an inner
    wrapper), down to three levels; an entry with nothing usable below it is kept as it is."""
    notes: list[str] = []
    for _ in range(3):
        bad = [e for e in entries
               if not any(expressible(c, trace.signature(e)) for c in calls if c.function == e)]
        if not bad:
            break
        changed = False
        for entry in bad:
            mine = {c.index for c in calls if c.function == entry}
            children = [c for c in trace.calls if c.parent in mine and c.error is None and c.n_launches > 0]
            if not children:
                continue
            calls = [c for c in calls if c.function != entry] + children
            inner = sorted({c.function for c in children})
            notes.append(f"{entry}: a spec cannot express its arguments; cases call what it calls "
                         f"instead: {', '.join(inner)}")
            changed = True
        if not changed:
            break
        counts: dict[str, int] = {}
        for c in calls:
            counts[c.function] = counts.get(c.function, 0) + c.repeats
        entries = tuple(sorted(counts, key=lambda f: -counts[f]))
    return entries, calls, notes


def _pin_kept(template: Template) -> Template:
    """Pin the sizes an index tensor kept as data depends on (its dims, its largest value)."""
    names: set[str] = set()
    call = template.calls[0]
    values = symbol_values(template, call)
    for path, node in leaves(call, with_returns=False):
        if isinstance(node, TracedTensor) and learn(node).keeps_values:
            for atom, sym in template.atom_symbol:
                if atom.path == path:
                    names.add(sym)
            s = node.stats
            if s is not None and s.max is not None:
                names |= {n for n, v in values.items() if v in (int(s.max), int(s.max) + 1)}
    return pin(template, names, "an index tensor kept as traced data depends on it") if names else template


class _Builder:
    """Collects cases with unique ids and the reasons calls were skipped."""

    def __init__(self, seeds: int, trace: Trace):
        self.seeds = seeds
        self.trace = trace
        self.cases: list[GeneratedCase] = []
        self.seen: set = set()
        self.notes: list[str] = []

    def add(self, case_id: str, role: CaseRole, template: Template, call: TracedCall,
            values: dict[str, int], origin: str, note: str, variety: str | None = None
            ) -> GeneratedCase | None:
        try:
            built: Built = materialize(template, call, values, self.trace.signature(template.function),
                                       variety=variety)
        except Unrepresentable as exc:
            self.notes.append(f"{case_id}: skipped, {exc} (a spec cannot express it)")
            return None
        key = (role, built.call)
        if key in self.seen:
            return None
        self.seen.add(key)
        sizes = tuple(sorted({**symbol_values(template, call), **values}.items()))
        detail = "; ".join(built.notes[:4])
        traced_bytes = max(call_bytes(template, call, symbol_values(template, call)), 1)
        gen = GeneratedCase(make_case(case_id, role, built, self.seeds, note), origin,
                            note + (f" [{detail}]" if detail and origin == "trace" else ""),
                            built.bytes, sizes, est_s=call.wall_s * max(built.bytes / traced_bytes, 1.0))
        self.cases.append(gen)
        return gen


def _representative(template: Template) -> TracedCall:
    """The traced call the odd-size and variety cases grow from: the smallest in bytes among
    those whose every size is at least 2, else the smallest. A call with a size of 1 grows no
    odd size, and a one-element tensor is traced as a constant fill: sin_block4's spec has a
    one-element case, and both of its variety cases were that one element at 1.54, so a
    candidate zeroing every |x| >= 32 passed its "large magnitudes" case."""
    def size(c: TracedCall) -> int:
        return call_bytes(template, c, symbol_values(template, c))
    grown = [c for c in template.calls
             if all(v >= 2 for v in symbol_values(template, c).values())]
    return min(grown or template.calls, key=size)


def _correctness(b: _Builder, template: Template, prefix: str, options: TestgenOptions) -> None:
    for n, call in enumerate(template.calls[: options.max_traced]):
        extra = f" (x{call.repeats})" if call.repeats > 1 else ""
        b.add(f"{prefix}trace-{n + 1}", CaseRole.CORRECTNESS, template, call,
              symbol_values(template, call), "trace",
              f"traced call {call.index} of {call.function}{extra}, re-drawn")
    rep = _representative(template)
    traced = {s.name: {symbol_values(template, c).get(s.name) for c in template.calls}
              for s in template.symbols}
    free = [s for s in template.symbols if s.kind in ("free", "block_following")]
    if not free:
        # nothing is free: sizes equal to a constexpr may be a test's round numbers (a 16x16x16
        # matmul with 16-wide blocks); try them too, and let the original decide (validation)
        free = _probed_tied(template)
    count = 0
    rep_values = symbol_values(template, rep)
    for sym in free:
        value = rep_values.get(sym.name, 0)
        if value < 2:
            continue
        for tag, new in odd_values(value):
            if new in traced[sym.name] or count >= options.max_odd:
                continue
            hazard = shrink_hazard(template, rep, sym.name, new)
            if hazard:
                b.notes.append(hazard)
                continue
            if b.add(f"{prefix}odd-{sym.name}-{tag}", CaseRole.CORRECTNESS, template, rep,
                     {sym.name: new}, "odd", f"odd shape: {sym.name} {value} -> {new} ({tag})"):
                count += 1
    if options.probe_tied and free and free[0].kind != "tied":
        # a size equal to a constexpr in one traced call may be a coincidence of round numbers
        # (K = 64 beside BLOCK_M = 64): tried once at a value that divides no block; the
        # original decides (a head dimension it requires is refused, and the case dropped)
        for sym in template.symbols:
            value = rep_values.get(sym.name, 0)
            if sym.kind == "tied" and value >= 2 and not shrink_hazard(template, rep, sym.name, value):
                new = odd_values(value)[0][1]
                b.add(f"{prefix}odd-{sym.name}-np2", CaseRole.CORRECTNESS, template, rep,
                      {sym.name: new}, "odd", f"odd shape: {sym.name} {value} -> {new} (equals a "
                      "constexpr in the traced call; tried at a size that divides no block)")
    growable = [s for s in free if rep_values.get(s.name, 0) >= 2]
    if len(growable) >= 2 and count < options.max_odd:
        values = {s.name: odd_values(rep_values[s.name])[0][1] for s in growable}
        b.add(f"{prefix}odd-all", CaseRole.CORRECTNESS, template, rep, values, "odd",
              "odd shape: " + ", ".join(f"{k} -> {v}" for k, v in values.items()))
    _variety(b, template, prefix, rep, growable, options)


def _variety(b: _Builder, template: Template, prefix: str, rep: TracedCall, growable: list[Symbol],
             options: TestgenOptions) -> None:
    """One case per variety (``cases.VARIETIES``), at odd sizes: every size that may change
    grows to a value that is no power of two (a partial last block along every dimension a
    kernel tiles), so that tails and unusual values are checked together, in a handful of cases."""
    rep_values = symbol_values(template, rep)
    values = {s.name: odd_values(rep_values[s.name])[0][1] for s in growable}
    sizes = ", ".join(f"{k} -> {v}" for k, v in values.items()) or "traced sizes"
    for variety in options.variety:
        b.add(f"{prefix}var-{variety}", CaseRole.CORRECTNESS, template, rep, values,
              "layout" if variety == "strided" else "values",
              f"{VARIETIES[variety]}; {sizes}", variety=variety)
    if options.big_bytes and growable:
        # larger sizes, still odd: paths a kernel takes above a size (a library call once M >=
        # 1024) and reductions long enough for a low-precision accumulator to show in the norm
        for factor in (4, 2):
            big = {s.name: factor * rep_values[s.name] + 1 for s in growable}
            if call_bytes(template, rep, big) <= options.big_bytes:
                b.add(f"{prefix}var-big", CaseRole.CORRECTNESS, template, rep, big, "odd",
                      f"large odd sizes (x{factor} + 1): size-dependent paths, long reductions; "
                      + ", ".join(f"{k} -> {v}" for k, v in big.items()))
                break


def _probed_tied(template: Template) -> list[Symbol]:
    """Tied sizes worth trying: only in templates where no size is free."""
    if any(s.kind in ("free", "block_following") for s in template.symbols):
        return []
    return [s for s in template.symbols if s.kind == "tied"]


def _to_probe(templates: list[Template], gone: set[str], cases: list[GeneratedCase],
              prefixes: dict[str, str]) -> list[tuple[Template, Symbol]]:
    """Sizes to try at twice their value: free ones whose every odd variant the original
    refused (``gone``: failed on, not merely timed out or left unrun), and tied ones of templates
    where nothing is free."""
    out = []
    for t in templates:
        p = prefixes[t.id]
        tied = _probed_tied(t)
        for s in t.symbols:
            tried = [c.case.id for c in cases if c.case.id.startswith(f"{p}odd-{s.name}-")]
            if s in tied or (tried and all(cid in gone for cid in tried)):
                out.append((t, s))
    return out


def validation_order(cases: list[GeneratedCase], interpreted: bool) -> tuple[str, ...]:
    """Case ids in the order to validate them: on the interpreter the cheapest first (estimated
    from the traced call's time and the case's bytes), so that a time budget that runs out costs
    the slowest cases, not the quick odd shapes behind a slow traced one; elsewhere as built."""
    ordered = sorted(cases, key=lambda c: (c.est_s, c.bytes)) if interpreted else cases
    return tuple(c.case.id for c in ordered)


def _set_kinds(templates: list[Template], kinds: dict[tuple[str, str], tuple[str, str]]) -> list[Template]:
    return [replace(t, symbols=tuple(replace(s, kind=kinds[(t.id, s.name)][0], why=kinds[(t.id, s.name)][1])
                                     if (t.id, s.name) in kinds else s for s in t.symbols))
            for t in templates]


def _validate_correctness(evaluator: Evaluator, task: Task, b: _Builder, templates: list[Template],
                          prefixes: dict[str, str], options: TestgenOptions, interpreted: bool
                          ) -> tuple[list[str], list[Dropped], list[str], list[Template]]:
    """Run the original on the correctness cases, probe sizes at their double, check stability.

    A size whose odd values were all refused (or, where nothing else scales, a size tied to a
    constexpr) is tried at twice its traced value: taken and stable, it is ``aligned`` (scaled by
    doubling, never odd); a refused free size becomes ``rejected``; a tied one stays tied.
    """
    deadline = time.monotonic() + options.budget_s if options.budget_s else None
    ran = run_original(evaluator, task, validation_order(b.cases, interpreted), deadline=deadline)
    dropped, notes, kept = list(ran.dropped), list(ran.notes), list(ran.kept)
    to_probe = _to_probe(templates, {d.case_id for d in dropped if d.refused}, b.cases, prefixes)
    probes: dict[tuple[str, str], str] = {}
    for t, sym in to_probe:
        rep = _representative(t)
        value = symbol_values(t, rep).get(sym.name, sym.value)
        why = "tied to a constexpr; nothing else scales" if sym.kind == "tied" else "every odd value was refused"
        g = b.add(f"{prefixes[t.id]}probe-{sym.name}-x2", CaseRole.CORRECTNESS, t, rep,
                  {sym.name: 2 * value}, "odd", f"probe: {sym.name} {value} -> {2 * value} ({why})")
        if g is not None:
            probes[(t.id, sym.name)] = g.case.id
    task = replace(task, cases=tuple(c.case for c in b.cases))
    if probes:
        pr = run_original(evaluator, task, tuple(probes.values()), deadline=deadline)
        kept += list(pr.kept)
        dropped += list(pr.dropped)
    by_id = {c.case.id: c for c in b.cases}
    views = [c for c in kept if by_id[c].origin == "layout"]
    if views:
        # a view the original does not handle (it ignores strides) cannot judge candidates;
        # the check runs the original twice on the case, so it stands for stability too
        checked = check_layout(evaluator, task, tuple(views), deadline=deadline)
        dropped += checked.dropped
        kept = [c for c in kept if c not in {d.case_id for d in checked.dropped}]
    rest = [c for c in kept if by_id[c].origin != "layout"]
    unchecked: list[str] = []
    if options.stability and rest and deadline is not None and time.monotonic() > deadline:
        notes.append("stability check not done: the validation time budget ran out")
        unchecked = list(rest)
    elif options.stability and rest:
        cheap = [c for c in rest if not interpreted or by_id[c].est_s <= options.stability_max_s]
        if len(cheap) < len(rest):
            notes.append(f"stability check skipped for {len(rest) - len(cheap)} case(s) that take "
                         f"over {options.stability_max_s:g} s a call in the interpreter")
            unchecked = [c for c in rest if c not in cheap]
        if cheap:
            stable = check_stable(evaluator, task, tuple(cheap), deadline=deadline)
            dropped += stable.dropped
            notes += stable.notes
            kept = [c for c in kept if c not in {d.case_id for d in stable.dropped}]
            unchecked += stable.unchecked
    if options.stable_only and unchecked:
        # a case the original may not reproduce rejects every candidate (the interpreter, 30
        # shortest TritonBench-G records: destindex_copy_kv2 and quantize_copy_kv kept such
        # cases when the 40 s budget ran out before the check)
        dropped += [Dropped(c, "not run: its stability was not checked (validation time budget)",
                            "not_run") for c in unchecked]
        kept = [c for c in kept if c not in set(unchecked)]
    kinds: dict[tuple[str, str], tuple[str, str]] = {}
    refused = {d.case_id for d in dropped if d.refused}
    for t, sym in to_probe:
        probe = probes.get((t.id, sym.name))
        if probe in kept:
            why = ("equals a constexpr in the test, but the original took twice the size"
                   if sym.kind == "tied" else "the original refused every odd value but took the double")
            kinds[(t.id, sym.name)] = ("aligned", why + ": scaled by doubling only")
        elif sym.kind != "tied" and probe is not None and probe not in refused:
            kinds[(t.id, sym.name)] = ("rejected", "the original refused every odd value; its double "
                                       "was not checked (time limit)")
            notes.append(f"{t.function}: {sym.name} is not scaled: the original refused every odd "
                         f"value and its double was not checked in time")
        elif sym.kind != "tied":
            kinds[(t.id, sym.name)] = ("rejected", "the original failed on every other size tried")
            notes.append(f"{t.function}: {sym.name} is not scaled: the original failed on every "
                         f"other size tried")
    return kept, dropped, notes, _set_kinds(templates, kinds)


def module_source(module_path: str | Path, section_path: str | Path | None = None) -> tuple[str, list[str]]:
    """The source the generated cases run on, and the imports added to it: the module, plus the
    top-level imports of its test section that it lacks (in a one-file original the module's
    functions may use names only the test section imports). Time or check the cases on this."""
    source = Path(module_path).read_text(encoding="utf-8")
    if section_path is None:
        return source, []
    imports = top_level_imports(Path(section_path).read_text(encoding="utf-8"))
    own = set(top_level_imports(source).splitlines())
    missing = [line for line in imports.splitlines() if line not in own]
    if missing:
        source = source.rstrip("\n") + "\n\n# imported by the test section\n" + "\n".join(missing) + "\n"
    return source, missing


def generate(module_path: str | Path, settings: Settings, work_dir: str | Path, *,
             options: TestgenOptions = TestgenOptions(), section_path: str | Path | None = None,
             device: str | None = None, source: str | None = None,
             evaluator: Evaluator | None = None) -> TestgenResult:
    """Cases for the kernel module at ``module_path`` from its own test (see the module doc).

    ``section_path``: a separate test or example file run against the module (TritonBench test
    sections; a user's ``test_kernel.py``) instead of the module's own tests or main block.
    ``source``: the code the cases are validated on (default: the module plus the imports its
    section adds), such as a task's own source. ``evaluator``: a worker to validate in (default:
    one started here and closed at the end).
    """
    work = Path(work_dir)
    stamps: dict[str, float] = {}
    t0 = time.perf_counter()
    dev = device or resolve_device(settings.device)
    trace = trace_source(module_path, section_path=section_path, driver=options.driver, device=dev,
                         functions=None, timeout_s=options.trace_timeout_s, work_dir=work / "trace")
    stamps["trace_s"] = time.perf_counter() - t0
    kind = failure_kind(trace)
    entries, calls, notes = select_entries(trace, options.entries)
    if not options.entries:
        entries, calls, more = descend_inexpressible(trace, entries, calls)
        notes += more
    if not trace.ok:
        notes.insert(0, f"the test did not run to its end ({kind}): {trace.error}")
    if not calls:
        stage, why = ("trace", kind) if kind else ("entry", "no_calls")
        if not kind:
            notes.append("no watched function launched a Triton kernel: name the entry with --entry, "
                         "or give a test that calls it")
        return TestgenResult((), (), (), (), tuple(notes), trace, device=dev, stage_failed=stage,
                             failure_kind=why, timings=tuple(stamps.items()))
    params = {fn: tuple(p.name for p in trace.signature(fn)) for fn in entries}
    templates = [_pin_kept(t) for t in build_templates(tuple(calls), params)]
    prefixes = {t.id: ("" if len(templates) == 1 else f"t{i + 1}-") for i, t in enumerate(templates)}
    b = _Builder(options.seeds, trace)
    share = replace(options, max_traced=min(options.max_traced, max(1, options.max_traced_total // len(templates))),
                    max_odd=min(options.max_odd, max(2, options.max_odd_total // len(templates))))
    for t in templates:
        _correctness(b, t, prefixes[t.id], share)
    notes += b.notes
    missing: list[str] = []
    if source is None:
        source, missing = module_source(module_path, section_path)
    if missing:
        notes.append("added the test section's imports to the module: " + "; ".join(missing)[:200])
    task = Task(name=Path(module_path).stem, source=source, entries=entries,
                cases=tuple(c.case for c in b.cases), origin=f"testgen:{module_path}",
                source_path=str(Path(module_path).resolve()))
    dropped: list[Dropped] = []
    interpreted = dev == "cpu"
    own = evaluator is None
    if own and options.validate:
        evaluator = Evaluator(settings, work / "validate", store=None, device=dev)
    elif not options.validate:
        evaluator = None
    try:
        kept_ids = [c.case.id for c in b.cases]
        if evaluator is not None and kept_ids:
            t1 = time.perf_counter()
            kept_ids, dropped, more, templates = _validate_correctness(
                evaluator, task, b, templates, prefixes, options, interpreted)
            notes += more
            stamps["validate_s"] = time.perf_counter() - t1
        perf_cases: list[GeneratedCase] = []
        if options.perf:
            t2 = time.perf_counter()
            perf = choose_perf_cases(templates, entries, b, evaluator, task, options, interpreted)
            perf_cases, notes, dropped = list(perf.cases), notes + list(perf.notes), dropped + list(perf.dropped)
            stamps["perf_s"] = time.perf_counter() - t2
    finally:
        if evaluator is not None and own:
            evaluator.close()
    keep = set(kept_ids)
    final = [c for c in b.cases if c.case.id in keep] + perf_cases
    result = TestgenResult(
        entries=entries, cases=tuple(final), dropped=tuple(dropped),
        symbols=tuple((t.id, t.symbols) for t in templates), notes=tuple(notes), trace=trace,
        device=dev, validated=options.validate, perf_by_bytes_only=interpreted,
        stage_failed=None if final else "cases",
        failure_kind=None if any(c.origin != "perf" for c in final) else (kind or "no_cases"),
        timings=tuple(stamps.items()))
    return replace(result, spec_text=spec_text(result, Path(module_path).name, options) if final else "")
