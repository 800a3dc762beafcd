"""Honest timing: L2 flushed, warmed up, CUDA events, variants interleaved, every sample kept.

BENCHMARK.md: the original and the candidate are measured in the same process, interleaved, on
the same inputs; the statistic is a median; noise must be shown beside every speedup. Here each
round times every variant back to back (rotating who goes first), so slow drifts of clock or
temperature hit all variants alike.

On the CPU interpreter the same loop runs with a wall clock and the samples are marked
``TimingMethod.INTERPRETER``: they are never reported as performance.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import torch

from ..config import FLUSH_MODES
from ..model import TimingMethod

L2_FLUSH_BYTES = 256 * 1024 * 1024   # larger than any current GPU's L2 (H100 50 MB, H200 60 MB)

# Bumped when a change makes earlier timings incomparable; stored timings of an older revision are
# taken again. 2: no reseeding inside timed calls (2026-11-23; revision 1 carried a 100-150 us
# host-side floor per call). 3: paced by default, a sample the kernels' GPU time (2026-11-27).
TIMING_REVISION = 3


@dataclass(frozen=True)
class TimingPlan:
    """How to time one case. ``abandon_slower``: after ``min_rounds`` rounds, a variant whose
    median is this many times the FIRST variant's (the incumbent, the original) is timed no
    further: a 5% per-case regression already rejects it, and timing an 8x slower candidate of a
    350 ms case cost 29 s of a 94 s search round (attention_forward_triton, H100, 2026-11-23).
    ``case_budget_ms``: rounds beyond ``min_rounds`` stop once the case has had this much GPU time
    over all variants; slow cases have low noise and need fewer samples. ``screen_slower``:
    within a case only, after ``min_rounds`` rounds a variant whose median is this many times the
    first variant's is timed no further on that case (its samples stay; None: ``abandon_slower``).
    It is tighter than ``abandon_slower``, which also keeps a variant off the next cases: a
    variant slower on one case can still be the faster side of a size split on another.
    ``screen_not_faster``: the same for a variant whose median is at least this fraction of the
    first variant's (a tie: not faster on that case); its samples stay. Once every other variant
    is off a case, the case ends: the first variant timed alone compares with nothing."""

    rounds: int = 10
    round_ms: float = 25.0        # target time per variant per round
    warmup_ms: float = 25.0
    flush_l2: bool = True
    flush_mode: str = "write"     # FLUSH_MODES: how the L2 is emptied before each timed call
    pace: bool = False            # _Pacer: GPU kept ahead of the host; a sample is the longer of
    # the call's GPU time and its host issue time
    interleave: str = "block"     # INTERLEAVE_MODES: block: each variant's calls of a round back
    # to back; call: the variants take turns call by call (a slow drift or a host/GPU regime
    # that lasts milliseconds then hits every variant alike)
    cuda_graph: bool = False
    max_calls_per_round: int = 200
    min_rounds: int = 4
    abandon_slower: float | None = 1.3
    screen_slower: float | None = None
    screen_not_faster: float | None = None
    case_budget_ms: float | None = 6000.0
    autotune_rep_ms: float | None = None  # None: @triton.autotune benchmarks each config with
    # Triton's own do_bench; a number: a short one of that many ms (runtime.quick_autotune)
    stop_after_s: float | None = None  # rounds beyond min_rounds stop once the case has taken
    # this many wall seconds (warm-up included): the worker's share of a request's end
    # (``EvaluateRequest.end_by``) for each case left, set per case, never in a request's plan


class _Flusher:
    """Empties the L2 cache before a timed call, so that the call reads its inputs from DRAM.

    ``write`` is triton's do_bench: zero a buffer larger than the L2. It leaves the L2 full of
    the buffer's *dirty* lines, which are written back to DRAM while the timed call runs and
    evicts them, so a microsecond-scale call pays for part of the flush. ``read`` reads the
    buffer instead (a reduction into a preallocated scalar): the L2 is left full of clean lines
    that cost nothing to evict. Both leave the call's own data out of the L2.
    """

    def __init__(self, enabled: bool, mode: str = "write"):
        if mode not in FLUSH_MODES:
            raise ValueError(f"flush mode must be one of {FLUSH_MODES}, not {mode!r}")
        self.buffer = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda") if enabled else None
        self.total = None
        if self.buffer is not None and mode == "read":
            self.buffer.zero_()
            self.total = torch.zeros((), dtype=torch.float32, device="cuda")

    def __call__(self) -> None:
        if self.buffer is None:
            return
        if self.total is not None:
            torch.sum(self.buffer, dim=0, out=self.total)
        else:
            self.buffer.zero_()


_CYCLES_PER_MS: list[float] = []
HOPELESS_FROM_MS = 1.0     # the warm-up estimate may drop a variant only from this call time
# On a case whose reference call takes this long or more, a variant the plan's screen would stop
# (``TimingPlan.screen_slower``) is stopped on its estimate once ``SCREEN_AT_ONCE_CALLS`` calls
# all confirm it, not after ``min_rounds`` rounds. Calls of 20 ms or more barely vary: over 116
# series of them (search rounds and final checks, four H100s and two H200s, 2026-11-28) no sample
# was 0.6% from its series' median, against the screen's 10%. Each round of such a case is one
# call a variant: attention_forward_triton's search round timed 17 variants on a 355 ms case for
# 32 s, 11 of them 15-520% slower there, each for 3 rounds after its warm-up (two H200s)
SCREEN_AT_ONCE_FROM_MS = 20.0
SCREEN_AT_ONCE_CALLS = 2
# rounds past the minimum also stop once a case has taken this many times its GPU budget
# (``TimingPlan.case_budget_ms``) in wall time: the budget counts the calls' GPU time only, and a
# 5 us call spends far more on its L2 flush, input step and launch. On an H100 pass (120 s a
# record, engine 1018ceeea5af, 2026-11-27) cosine_compute's round of 16 variants at 5.4 us a
# call ran 97 s on four cases (10 rounds of 200 calls each, 17 ms of GPU time a round) and was
# killed at the record's cap, its final check never run.
CASE_WALL_FACTOR = 1.5
OVERRUN_FACTOR = 2.0    # below the minimum rounds, a case past this many times its share of a
# request's time left (``TimingPlan.stop_after_s``) stops after its first round: a finalists'
# sweep (four rounds, all of them the minimum) of fp4_to_bf16 timed for 36 s where its estimate
# fitted the room, and the record's cap killed it with its 1.16x best never checked (H100 x4,
# engine 7dffd2b9f369, 2026-11-27)
PAD_LIMIT_MS = 2.0          # the longest GPU sleep put ahead of a timed call
PAD_HOST_FACTOR = 2.0       # the sleep ahead of a paced call: this many times its host time,
PAD_FLOOR_MS = 0.03         # plus this: with the flush before it, the host gains about three
# times its work on the GPU each call, so a burst of host load eats that lead before the GPU waits
HOST_LEARN_CALLS = 9        # host-time samples a paced variant's pad and host comparison come from
HOST_REGRESSION = (1.2, 0.005)   # a variant whose host time is over 1.2x AND 5 us over the
# reference's keeps the host's floor on its samples (_Pacer.host_heavier)
HOST_SAMPLED_BELOW_MS = 2.0  # calls whose GPU time is longer than this: the host cannot dominate


def _sleep_cycles_per_ms() -> float:
    """How many ``torch.cuda._sleep`` cycles last a millisecond on this GPU (measured once)."""
    if not _CYCLES_PER_MS:
        cycles = 200_000
        torch.cuda._sleep(cycles)   # warm
        runs = []
        for _ in range(3):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.cuda._sleep(cycles)
            e.record()
            torch.cuda.synchronize()
            runs.append(s.elapsed_time(e))
        _CYCLES_PER_MS.append(cycles / max(statistics.median(runs), 1e-4))
    return _CYCLES_PER_MS[0]


class _Pacer:
    """Times the GPU side of a call with the host kept ahead of it, and the host side apart.

    With only CUDA events around the call, a call whose host side (the wrapper's Python and the
    launches) takes about as long as the flush before it runs on the GPU lands, sample by
    sample, in one of two regimes: the GPU is ahead (the events see the kernels alone) or it
    waits for the host (they see the wrapper's Python). The same original then read 4.3 us in
    one evaluation and 13.3 us in the next, or 5.8 us against itself at 451 us
    (fast_rms_layernorm, H100, 2026-11-24). On four H100s, each running a record beside the
    others' compile and verification work, the host regime came in stretches of tens of calls
    that hit every variant of the turns alike: l2_norm_triton1's perf-09, a 6 us kernel, read
    a median of 85 us in its baseline and 6.5 us in a search round, its samples in runs of
    6-8 us and runs of 50-150 us (engine 190e1f012654, 2026-11-27); a kernel twice as fast
    reads the same host time there. do_bench's steady state, which BENCHMARK.md's time follows,
    is the other regime: the host ahead, the events around the kernels alone.

    Here a GPU sleep longer than the call's host side goes before the start event
    (``PAD_HOST_FACTOR`` times its host time, plus ``PAD_FLOOR_MS``), so the events see the
    GPU's work alone. The host side is timed on its own, each call after a synchronisation (a
    wrapper that synchronises inside pays for its own kernels, as it would in use). A variant
    whose host side is longer than the first variant's (the reference: the original, the
    incumbent) by ``HOST_REGRESSION`` has each sample raised to a host sample where the host is
    slower, so a change that adds host work (an autotuner's dispatch) is not hidden by the
    pacing; the reference and every variant that adds no host work keep their GPU times.
    Raising every variant's samples to its host time made the host's noise the samples' (an A/A
    of a 5 us call was noisier paced than unpaced, H100, 2026-11-24).

    What this gives up: host work a variant removes is not seen (a wrapper's Python made
    cheaper reads the same), where do_bench sees host work beyond its flush's length. Host work
    a variant adds is seen.
    """

    def __init__(self, enabled: bool, reference: str | None = None):
        self.enabled = enabled
        self.pad_cycles: dict[str, int] = {}
        self.longest_pad = 0            # the longest of pad_cycles: every variant's sleep
        self.host_ms: dict[str, float] = {}
        self.reference = reference      # the variant others' host times compare with
        self.fns: dict[str, Callable[[], object]] = {}
        self.heavier: dict[str, bool] = {}     # host_heavier's confirmed answers

    def learn(self, name: str, fn: Callable[[], object]) -> None:
        """Measure ``fn``'s host time and size the sleep that keeps the GPU ahead of it."""
        if not self.enabled:
            return
        self.fns[name] = fn
        host = statistics.median(self.host_samples(fn, HOST_LEARN_CALLS))
        self.host_ms[name] = host
        pad_ms = min(PAD_LIMIT_MS, PAD_HOST_FACTOR * host + PAD_FLOOR_MS)
        self.pad_cycles[name] = int(pad_ms * _sleep_cycles_per_ms())
        self.longest_pad = max(self.longest_pad, self.pad_cycles[name])

    def pad(self, name: str) -> None:
        """The sleep before ``name``'s start event: the longest any variant learned, the same for
        every variant. Each variant's host time is learned at its own moment; a variant learned
        while the host was quiet got a shorter sleep, which the host's load in the turns could
        outlast, its events then seeing host time the others' did not (an A/A of a 5.4 us add
        read its two copies 5.6% apart with every core of the host busy: four H100s, engine
        20710a76802c, 2026-11-28). The sleep comes before the start event, so its length is
        never in a sample; what it costs is wall time: beside a variant that adds host work (up
        to ``PAD_LIMIT_MS``), every variant's calls take that long too."""
        cycles = self.longest_pad if name in self.pad_cycles else 0
        if cycles:
            torch.cuda._sleep(cycles)

    def host_heavier(self, name: str) -> bool:
        """Whether ``name``'s host side is longer than the reference's beyond ``HOST_REGRESSION``
        (ratio and margin both). Learned one variant after the other, a burst of host load can
        fall on one variant's calls alone: a variant found heavier is measured again, its calls
        and the reference's taking turns, and that answer is kept."""
        if name in self.heavier:
            return self.heavier[name]
        ref = self.host_ms.get(self.reference) if self.reference is not None else None
        mine = self.host_ms.get(name)
        if ref is None or mine is None or name == self.reference:
            return False
        found = _heavier(mine, ref)
        if found and self.reference in self.fns and name in self.fns:
            mine_s, ref_s = [], []
            for _ in range(HOST_LEARN_CALLS):
                mine_s += self.host_samples(self.fns[name], 1)
                ref_s += self.host_samples(self.fns[self.reference], 1)
            found = _heavier(statistics.median(mine_s), statistics.median(ref_s))
        self.heavier[name] = found
        return found

    @staticmethod
    def host_samples(fn: Callable[[], object], calls: int) -> list[float]:
        out = []
        for _ in range(calls):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
        return out

    def combine(self, name: str, fn: Callable[[], object], gpu: list[float],
                estimate_ms: float) -> list[float]:
        """``gpu`` as it is, or, for a variant heavier on the host than the reference
        (``host_heavier``), each sample raised to a host sample where the host is slower."""
        if not self.enabled or not gpu or estimate_ms > HOST_SAMPLED_BELOW_MS \
                or not self.host_heavier(name):
            return gpu
        host = self.host_samples(fn, min(len(gpu), 10))
        return [max(g, host[i % len(host)]) for i, g in enumerate(gpu)]


def _heavier(mine_ms: float, reference_ms: float) -> bool:
    ratio, margin_ms = HOST_REGRESSION
    return mine_ms > reference_ms * ratio and mine_ms > reference_ms + margin_ms


def _estimate_ms(fn: Callable[[], object], flush: _Flusher, warmup_ms: float) -> float:
    """Warm up ``fn`` (compilation, autotuning, caches) and estimate one call's time in ms.

    A quick call is warmed up for ``warmup_ms`` first and then estimated by the median of five
    calls timed one by one. The estimate can drop a variant (``TimingPlan.abandon_slower``):
    one hiccup in a mean of three once read 0.44 ms for a 0.016 ms call (add_example, H100,
    2026-11-23), and estimates taken before the warm-up read 0.095-0.71 ms for 5 us calls and
    dropped every candidate of l2_norm_bwd as "138x slower" (H100, 2026-11-24): the first calls
    on a new case pay for allocations and cold caches. A slow call (``warmup_ms`` or more) is
    its own estimate.
    """
    fn()
    torch.cuda.synchronize()
    first = max(_time_events(fn, 1, flush)[0], 1e-3)
    if first >= warmup_ms:
        return first
    for _ in range(int(min(warmup_ms / first, 1000))):
        flush()
        fn()
    torch.cuda.synchronize()
    return max(statistics.median(_time_events(fn, 5, flush)), 1e-3)


def confirm_calls(estimate_ms: float, plan: "TimingPlan") -> int:
    """Calls that confirm a variant hopeless before it is dropped: 3 to 15, fewer for slow calls
    (a 350 ms call, 8x slower than its reference, cost 29 s of a search round when fully timed)."""
    return max(3, min(15, int(4 * plan.round_ms / max(estimate_ms, 1e-3))))


def _time_events(fn: Callable[[], object], calls: int, flush: _Flusher,
                 pad: Callable[[], None] | None = None) -> list[float]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    for i in range(calls):
        flush()
        if pad is not None:
            pad()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def _capture_graph(fn: Callable[[], object], calls: int, flush: _Flusher) -> tuple[object, object]:
    """Capture ``calls`` (flush, fn) pairs and ``calls`` flushes alone, to subtract the flush."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()   # warm the capture stream
    torch.cuda.current_stream().wait_stream(stream)
    work, flushes = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(work):
        for _ in range(calls):
            flush()
            fn()
    with torch.cuda.graph(flushes):
        for _ in range(calls):
            flush()
    return work, flushes


def _time_events_turns(fns: dict[str, Callable[[], object]], order: list[str], calls: int,
                       flush: _Flusher, pad: Callable[[str], None] | None = None,
                       vary: Mapping[str, Callable[[], None]] | None = None) -> dict[str, list[float]]:
    """``calls`` turns; in each, every variant of ``order`` is timed once (the order rotating
    from turn to turn, so no variant always follows the same one). ``vary``: per variant, what
    changes its inputs before each of its calls, outside the timed region
    (``runtime.varied_inputs``): every variant steps once a turn, so all compute on the same
    values at every turn."""
    events = []
    vary = vary or {}
    for i in range(calls):
        turn = order[i % len(order):] + order[: i % len(order)]
        for name in turn:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if name in vary:
                vary[name]()
            flush()
            if pad is not None:
                pad(name)
            start.record()
            fns[name]()
            end.record()
            events.append((name, start, end))
    torch.cuda.synchronize()
    out: dict[str, list[float]] = {n: [] for n in order}
    for name, start, end in events:
        out[name].append(start.elapsed_time(end))
    return out


def _time_graph(graphs: tuple[object, object], calls: int) -> float:
    work, flushes = graphs
    times = []
    for graph in (work, flushes):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()  # type: ignore[attr-defined]
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return max(times[0] - times[1], 0.0) / calls


def time_interleaved_cuda(fns: dict[str, Callable[[], object]], plan: TimingPlan,
                          progress: Callable[[str], None] | None = None,
                          vary: Mapping[str, Callable[[], None]] | None = None
                          ) -> tuple[dict[str, list[float]], TimingMethod]:
    """Time every variant in ``fns`` in interleaved rounds; return all samples (ms) per variant.
    ``vary`` (variant -> a step of ``runtime.varied_inputs.VariedInputs``) changes the inputs
    between the turns of the call-by-call interleave, the timing every candidate gets (a warm-up,
    a variant timed alone, CUDA graphs and block interleaving keep them as they are)."""
    started = time.monotonic()
    flush = _Flusher(plan.flush_l2, plan.flush_mode)
    names = list(fns)
    pacer = _Pacer(plan.pace and not plan.cuda_graph, names[0] if names else None)
    estimates = {}
    for name in names:
        if progress:
            progress(name)
        estimates[name] = _estimate_ms(fns[name], flush, plan.warmup_ms)
        if pacer.enabled and estimates[name] < plan.warmup_ms:
            # the unpaced estimate of a quick call can be the host's time, not the call's (one
            # read 451 us for a 5.8 us call, and the variant was dropped as hopeless on it)
            pacer.learn(name, fns[name])
            paced = _time_events(fns[name], 3, flush, lambda n=name: pacer.pad(n))
            estimates[name] = max(statistics.median(pacer.combine(name, fns[name], paced, 0.0)), 1e-3)
    calls = {n: max(1, min(plan.max_calls_per_round, int(plan.round_ms / estimates[n]))) for n in names}
    samples: dict[str, list[float]] = {n: [] for n in names}
    active = list(names)
    if plan.abandon_slower is not None and len(names) > 1:
        # hopeless already by the warm-up estimate (3x the margin over the reference's, far
        # beyond noise), if a few more calls confirm it: they are its samples. Only for calls
        # of a millisecond or more: below that a call timed alone lands in the host-bound or
        # the GPU-bound regime as a whole (an estimate of 0.71 ms for a 5 us call vetoed every
        # l2_norm_bwd candidate as up to 138x slower; 15 confirming calls of the same file
        # read 76 us where the file itself, timed in turns, read 38 us: H100, 2026-11-24), and
        # such calls are cheap to time in full anyway.
        ref = estimates[names[0]]
        limit = 3 * max(plan.abandon_slower, 1.0) * ref
        for n in names[1:]:
            if estimates[n] > limit and estimates[n] >= HOPELESS_FROM_MS:
                confirm = _time_events(fns[n], confirm_calls(estimates[n], plan), flush)
                if statistics.median(confirm) > limit:
                    samples[n].extend(confirm)
                    active.remove(n)
    if plan.screen_slower is not None and len(active) > 1 \
            and estimates[names[0]] >= SCREEN_AT_ONCE_FROM_MS:
        # a slow case: each estimate is one timed call, and a call this slow barely varies, so
        # a variant the plan's screen would stop after its minimum rounds is stopped at once,
        # on this case only, once its confirming calls read as slow
        ref = estimates[names[0]]
        for n in [n for n in active[1:] if estimates[n] > plan.screen_slower * ref]:
            confirm = _time_events(fns[n], SCREEN_AT_ONCE_CALLS, flush)
            if min(confirm) > plan.screen_slower * ref:
                samples[n].extend(confirm)
                active.remove(n)
    method = TimingMethod.CUDA_EVENTS_PACED if pacer.enabled else TimingMethod.CUDA_EVENTS
    graphs = {}
    if plan.cuda_graph:
        try:
            graphs = {n: _capture_graph(fns[n], calls[n], flush) for n in active}
            method = TimingMethod.CUDA_GRAPH
        except Exception:   # capture is not possible for every kernel (host syncs, allocations)
            graphs = {}
    spent_ms = 0.0
    for r in range(plan.rounds):
        if r >= plan.min_rounds:
            active = _still_worth_timing(active, samples, plan)
            if len(active) < 2 <= len(names):
                break
            if plan.case_budget_ms is not None and spent_ms > plan.case_budget_ms:
                break
            waited = time.monotonic() - started
            if plan.case_budget_ms is not None and waited * 1e3 > CASE_WALL_FACTOR * plan.case_budget_ms:
                break
            if plan.stop_after_s is not None and waited > plan.stop_after_s:
                break
        elif r >= 1 and plan.stop_after_s is not None \
                and time.monotonic() - started > OVERRUN_FACTOR * plan.stop_after_s:
            break
        order = active[r % len(active):] + active[: r % len(active)]
        if plan.interleave == "call" and not graphs and len(order) > 1:
            turns = max(1, min(calls[n] for n in order))
            for name, got in _time_events_turns(fns, order, turns, flush,
                                                pacer.pad if pacer.enabled else None, vary).items():
                samples[name].extend(pacer.combine(name, fns[name], got, estimates[name]))
                spent_ms += turns * estimates[name]
            continue
        for name in order:
            if graphs:
                samples[name].append(_time_graph(graphs[name], calls[name]))
            elif pacer.enabled:
                got = _time_events(fns[name], calls[name], flush, lambda n=name: pacer.pad(n))
                samples[name].extend(pacer.combine(name, fns[name], got, estimates[name]))
            else:
                samples[name].extend(_time_events(fns[name], calls[name], flush))
            spent_ms += calls[name] * estimates[name]
    return samples, method


def _still_worth_timing(active: list[str], samples: dict[str, list[float]], plan: TimingPlan) -> list[str]:
    """Drop the variants (never the first, the reference) already slower than the first by the
    plan's screen (``TimingPlan.screen_slower``, else ``abandon_slower``), or no faster than
    ``screen_not_faster`` of it."""
    margin = plan.screen_slower if plan.screen_slower is not None else plan.abandon_slower
    now = {n: samples[n] for n in active}
    slow = far_slower(now, active[0], margin) | far_slower(now, active[0], plan.screen_not_faster)
    return [n for n in active if n not in slow]


def far_slower(samples: dict[str, list[float]], reference: str, margin: float | None) -> set[str]:
    """Variants whose median is over ``margin`` times the reference's (never the reference)."""
    if margin is None or not samples.get(reference):
        return set()
    ref = statistics.median(samples[reference])
    return {n for n, v in samples.items() if n != reference and v and statistics.median(v) > margin * ref}


def time_interleaved_cpu(fns: dict[str, Callable[[], object]], plan: TimingPlan,
                         progress: Callable[[str], None] | None = None,
                         vary: Mapping[str, Callable[[], None]] | None = None
                         ) -> tuple[dict[str, list[float]], TimingMethod]:
    """Wall-clock stand-in for the interpreter: a few rounds (each a turn: every variant once,
    its inputs varied first, as on the GPU), marked as not performance."""
    names = list(fns)
    vary = vary or {}
    samples: dict[str, list[float]] = {n: [] for n in names}
    for name in names:
        if progress:
            progress(name)
        fns[name]()   # warm-up
    for r in range(max(1, min(plan.rounds, 3))):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            if name in vary:
                vary[name]()
            t0 = time.perf_counter()
            fns[name]()
            samples[name].append((time.perf_counter() - t0) * 1e3)
    return samples, TimingMethod.INTERPRETER


def time_interleaved(fns: dict[str, Callable[[], object]], plan: TimingPlan, device: str,
                     progress: Callable[[str], None] | None = None,
                     vary: Mapping[str, Callable[[], None]] | None = None
                     ) -> tuple[dict[str, list[float]], TimingMethod]:
    if device == "cuda":
        return time_interleaved_cuda(fns, plan, progress, vary)
    return time_interleaved_cpu(fns, plan, progress, vary)
