"""Check what is shipped, not only what is watched: bare calls, changed inputs, repeated runs.

Every call ``verify.runner`` makes runs under dispatch modes, a launch hook and poisoned
allocations; a variant can notice them and compute the right thing only then, while the timer
(``Invocation.timed``) and the user call it bare. A probe therefore runs one case through the
same sequence of BARE calls (no mode, no hook, no recorder: ``Invocation.timed`` where the
invocation has one) on the original and on the candidate, and compares every step:

1. ``calls`` bare calls in a row on one invocation (1 or 2, drawn from the verification's nonce:
   the candidate cannot know which call is compared); only the last is compared. A difference
   is ``watched``.
2. A few elements of every read-only floating input changed in place (one to exact zero, one
   negated, one scaled), then one more call on the same tensors: a result that does not follow
   came from a cache keyed on shape, address or sampled elements (``stateful``; a cache keyed
   on new addresses changes the module's state on every call and is ``call_state`` in the main
   pass). This call is profiled (verify.census): aten ops hidden from the dispatch recorder, and
   CUDA kernels that are neither aten's nor the module's Triton kernels, are ``library_op``.
3. On a GPU, ``repeats`` more fresh invocations of the step-1 inputs, one call each: a result
   that changes between identical runs where the original's agree is a ``race`` (order-dependent
   atomics, a missing barrier) that one run can miss.

The original makes one call in step 1 where it writes no argument (its result does not depend on
how often it ran); the probe then costs about four calls of each variant on one case.

Results returned by a later step must not share memory with an earlier step's (``aliased``).

Bare calls run without poisoned allocations, so elements of a wrapper's ``torch.empty`` buffer
that the original never writes hold whatever the memory held: two identical runs differ there.
Those positions (``unwritten_masks``: NaN in one call of the ORIGINAL under poisoned
allocations) are left out of every bare-call comparison; the guarded main pass still holds the
candidate to them. Seen on an H100 (torch 2.11): TritonBench-G fifth_order_sph_harmonics writes
its output from a column offset, and the original as a candidate was refused as a ``race``.
"""

from __future__ import annotations

import logging
import random
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..model import Case, Mismatch
from .bounds import outside
from .census import Census, op_census
from .config_variation import GROSS_NORM, GROSS_SHARE, may_round_otherwise, schedule_sensitive
from .freshness import returned_aliases, returned_tensors
from .poison import poison_, poison_allocations
from .runner import MakeInvocation, Run, _seed, run_variant
from .tree import bitwise_equal, clone_tree, iter_tensors, same_bits, unravel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProbePlan:
    """The sequence both variants go through (drawn once, identical for both)."""

    case: Case
    seed: int
    calls: int                       # bare calls before the first comparison
    perturb: frozenset[str]          # argument paths changed in place between calls
    poison: frozenset[str]           # pure outputs, poisoned before each fresh invocation
    repeats: int                     # GPU: identical runs that must agree
    salt: int                        # where the perturbed elements fall
    written: frozenset[str] = frozenset()   # arguments the original writes: kept and compared


@dataclass
class ProbeRun:
    """What one variant left at each step: (label, cloned result, cloned args) per step."""

    steps: list[tuple[str, Any, dict[str, torch.Tensor]]] = field(default_factory=list)
    aliases: list[tuple[str, str]] = field(default_factory=list)
    census: Census | None = None
    error: BaseException | None = None
    inputs: dict[str, torch.Tensor] | None = None    # the inputs, when the probe built them


def plan_probe(case: Case, seed: int, nonce: int, outputs: frozenset[str],
               read_only_floats: frozenset[str], device: str, repeats: int | None,
               written: frozenset[str] = frozenset()) -> ProbePlan:
    rng = random.Random(nonce * 7919 + 17)
    if repeats is None:
        repeats = 2 if device.startswith("cuda") else 0
    return ProbePlan(case, seed, rng.randint(1, 2), read_only_floats, outputs, repeats,
                     rng.randrange(1 << 30), written)


def _perturb(tensors: dict[str, torch.Tensor], paths: frozenset[str], salt: int) -> None:
    """Change three elements of each path: to 0.0, to minus itself, to 4x itself plus 0.5.
    Written through ``.data``, whose version counter is its own: the tensor's ``_version`` does
    not move, as it does not under a kernel's stores, so a cache keyed on it cannot tell (a
    red-team cache keyed on id() and ``_version`` looked fresh to torch's in-place writes)."""
    with torch.no_grad():
        for path in sorted(paths):
            t = tensors.get(path)
            if t is None or t.numel() == 0 or not t.is_floating_point():
                continue
            t = t.data
            rng = random.Random(f"{salt}:{path}")
            for k in range(min(3, t.numel())):
                at = unravel(rng.randrange(t.numel()), tuple(t.shape))
                old = float(t[at].item()) if t.dim() else float(t.item())
                new = (0.0, -old, 4.0 * old + 0.5)[k]
                if t.dim():
                    t[at] = new
                else:
                    t.fill_(new)


def _build(module: types.ModuleType, plan: ProbePlan, make_invocation: MakeInvocation,
           device: str, inputs: dict[str, torch.Tensor] | None
           ) -> tuple[Any, dict[str, torch.Tensor]]:
    inv = make_invocation(module, plan.case, plan.seed, device)
    tensors = dict(iter_tensors(inv.arguments, "arg"))
    with torch.no_grad():
        for path, t in tensors.items():
            if inputs is not None and path in inputs and not bitwise_equal(t, inputs[path]):
                t.copy_(inputs[path])
        for path in plan.poison:
            if path in tensors:
                poison_(tensors[path])
    return inv, tensors


def run_probe(module: types.ModuleType, plan: ProbePlan, make_invocation: MakeInvocation,
              device: str, inputs: dict[str, torch.Tensor] | None,
              sync: Callable[[], None] | None, *, trusted: bool = False) -> ProbeRun:
    """Run ``plan`` on ``module`` with bare calls; see the module docstring. ``inputs``: the bits
    every argument must hold (None: the invocation's own, kept in ``ProbeRun.inputs``).
    ``trusted`` (the original): one call in step 1 where the plan writes no argument."""
    out = ProbeRun()
    keep: list[Any] = []                 # invocations stay alive: no address is reused

    def bare(inv: Any) -> Any:
        fn = getattr(inv, "timed", None) or inv.call
        _seed(plan.seed)                 # random draws (dropout) alike in both variants
        result = fn()
        if sync is not None:
            sync()
        return result

    def record(label: str, result: Any, tensors: dict[str, torch.Tensor],
               earlier: list[torch.Tensor]) -> list[torch.Tensor]:
        out.aliases.extend((f"{label} {p}", what) for p, what in
                           returned_aliases(result, {}, (), earlier))
        # only what the original writes is kept: inputs can be gigabytes (a KV cache), and the
        # main pass already holds read-only arguments to bit-identity
        out.steps.append((label, clone_tree(result),
                          {p: clone_tree(t) for p, t in tensors.items() if p in plan.written}))
        return earlier + returned_tensors(result)

    try:
        inv, tensors = _build(module, plan, make_invocation, device, inputs)
        if inputs is None:
            inputs = out.inputs = {p: clone_tree(t) for p, t in tensors.items()}
        keep.append(inv)
        result = None
        for _ in range(1 if trusted and not plan.written else plan.calls):
            result = bare(inv)
        earlier = record(f"bare call {plan.calls}", result, tensors, [])
        if plan.perturb:
            _perturb(tensors, plan.perturb, plan.salt)
            with op_census() as census:
                result = bare(inv)
            out.census = census
            earlier = record("inputs changed in place", result, tensors, earlier)
        for i in range(plan.repeats):
            inv3, tensors3 = _build(module, plan, make_invocation, device, inputs)
            keep.append(inv3)
            earlier = record(f"identical run {i + 2}", bare(inv3), tensors3, earlier)
    except BaseException as exc:  # noqa: BLE001 - the caller decides what a failure is
        out.error = exc
    return out


def _invocation_on(module: types.ModuleType, case: Case, seed: int,
                   make_invocation: MakeInvocation, device: str,
                   inputs: dict[str, torch.Tensor] | None) -> tuple[Any, dict[str, torch.Tensor]]:
    """A fresh invocation of (case, seed) whose arguments hold ``inputs`` where given."""
    inv = make_invocation(module, case, seed, device)
    tensors = dict(iter_tensors(inv.arguments, "arg"))
    with torch.no_grad():
        for path, t in tensors.items():
            if inputs is not None and path in inputs and not bitwise_equal(t, inputs[path]):
                t.copy_(inputs[path])
    return inv, tensors


def unwritten_masks(module: types.ModuleType, case: Case, seed: int,
                    make_invocation: MakeInvocation, device: str,
                    inputs: dict[str, torch.Tensor] | None,
                    sync: Callable[[], None] | None) -> dict[str, torch.Tensor]:
    """Returned floating tensors' positions the ORIGINAL leaves unwritten: NaN after one call of
    it under poisoned allocations on ``inputs`` (``{path: bool mask}``, only where any)."""
    inv, tensors = _invocation_on(module, case, seed, make_invocation, device, inputs)
    _seed(seed)
    with poison_allocations():
        result = inv.call()
    if sync is not None:
        sync()
    masks = {}
    for path, t in iter_tensors(result, "return"):
        if t.is_floating_point() or t.is_complex():
            nan = torch.isnan(t)
            if bool(nan.any()):
                masks[path] = nan.clone()
    return masks


def masked(tree: Any, masks: dict[str, torch.Tensor]) -> Any:
    """A clone of a result tree with the ``masks`` positions (``unwritten_masks``) set to zero in
    every tensor of the same path and shape; the tree itself unchanged."""
    if not masks:
        return tree
    out = clone_tree(tree)
    with torch.no_grad():
        for path, t in iter_tensors(out, "return"):
            mask = masks.get(path)
            if mask is not None and mask.shape == t.shape and mask.device == t.device:
                t.masked_fill_(mask, 0)
    return out


def compare_probe(ref: ProbeRun, cand: ProbeRun,
                  compare: Callable[[Any, Any, str], list[Mismatch]]
                  ) -> list[tuple[str, list[Mismatch]]]:
    """(step label, mismatches) for each step where the candidate differs from the original."""
    found = []
    for (label, r_result, r_args), (_, c_result, c_args) in zip(ref.steps, cand.steps):
        diffs = compare(r_result, c_result, "return")
        for path, r in r_args.items():
            if path in c_args:
                diffs.extend(compare(r, c_args[path], path))
        if diffs:
            found.append((label, diffs))
    return found


def disagrees_with_itself(ref: ProbeRun, compare: Callable[[Any, Any, str], list[Mismatch]]) -> bool:
    """Whether the original's identical runs differ from its first bare call (it races: its
    probe values cannot judge a candidate; the main pass forgives within its variation)."""
    first = ref.steps[0] if ref.steps else None
    for label, result, args in ref.steps[1:]:
        if first is None or not label.startswith("identical run"):
            continue
        if compare(first[1], result, "return") or \
                any(compare(first[2][p], t, p) for p, t in args.items() if p in first[2]):
            return True
    return False


def inputs_of(args: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inputs a bare call had (``bare_outputs``' ``input ...`` entries), by argument path."""
    return {p[len("input "):]: t for p, t in args.items() if p.startswith("input ")}


def bare_outputs(module: types.ModuleType, case: Case, seed: int, make_invocation: MakeInvocation,
                 device: str, inputs: dict[str, torch.Tensor] | None,
                 sync: Callable[[], None] | None) -> tuple[Any, dict[str, torch.Tensor]]:
    """One bare call (``Invocation.timed``) on fresh inputs of (case, seed), ``inputs`` imposed:
    (cloned result, cloned arguments)."""
    inv, tensors = _invocation_on(module, case, seed, make_invocation, device, inputs)
    pristine = {p: clone_tree(t) for p, t in tensors.items()} if inputs is None else inputs
    fn = getattr(inv, "timed", None) or inv.call
    _seed(seed)
    result = fn()
    if sync is not None:
        sync()
    return clone_tree(result), {p: clone_tree(t) for p, t in tensors.items()} | \
        {f"input {p}": t for p, t in pristine.items()}


def original_bare_view(reference: types.ModuleType, case: Case, seed: int,
                       make_invocation: MakeInvocation, device: str,
                       compare: Callable[[Any, Any, str], list[Mismatch]],
                       ref: tuple[Any, dict[str, torch.Tensor]],
                       sync: Callable[[], None] | None,
                       exact: list[bool] | None = None) -> tuple[dict[str, torch.Tensor], bool]:
    """What the original's bare call ``ref`` (``bare_outputs``) needs to judge a candidate's:
    (the elements it leaves unwritten, ``unwritten_masks``; whether a second bare call of it on
    the same inputs agrees with the first: False, it races, and its bare calls judge nothing).
    Two more calls of the original, both on ``ref``'s inputs."""
    ref_result, ref_args = ref
    inputs = inputs_of(ref_args)
    masks = unwritten_masks(reference, case, seed, make_invocation, device, inputs, sync)
    again, again_args = bare_outputs(reference, case, seed, make_invocation, device, inputs, sync)
    outs = [p for p in ref_args if not p.startswith("input ")]
    differs = compare(masked(ref_result, masks), masked(again, masks), "return") or \
        any(compare(ref_args[p], again_args[p], p) for p in outs)
    if exact is not None:      # whether the two calls agree bit for bit (no atomics' wobble)
        exact.append(same_bits(masked(ref_result, masks), masked(again, masks))
                     and all(bitwise_equal(ref_args[p], again_args[p]) for p in outs))
    return masks, not differs


def candidate_bare_diffs(ref: tuple[Any, dict[str, torch.Tensor]],
                         cand: tuple[Any, dict[str, torch.Tensor]], masks: dict[str, torch.Tensor],
                         compare: Callable[[Any, Any, str], list[Mismatch]],
                         rounding: bool = True) -> list[Mismatch]:
    """How a candidate's bare call (``cand``: ``bare_outputs`` on the inputs the original's bare
    call ``ref`` had) differs from the original's, the elements the original leaves unwritten
    (``masks``) masked: value differences only beyond ``GROSS_NORM`` (an autotuner may have
    picked a config whose rounding verification never saw); unwritten, NaN, shape differences
    always; every difference beyond the tolerance where neither variant may round otherwise
    (``rounding`` False: ``config_variation.may_round_otherwise``)."""
    (ref_result, ref_args), (result, args) = ref, cand
    outs = [p for p in ref_args if not p.startswith("input ")]
    diffs = compare(masked(ref_result, masks), masked(result, masks), "return")
    for p in outs:
        if p in args:
            diffs.extend(compare(ref_args[p], args[p], p))
    return gross_only(diffs) if rounding else diffs


def gross_only(diffs: list[Mismatch]) -> list[Mismatch]:
    """The differences no config's rounding explains: value differences beyond ``GROSS_NORM``
    (relative norm) or, in an exact dtype (no norm: a quantized or index output), in more than
    ``GROSS_SHARE`` of the elements; every difference of another kind (unwritten, NaN, shape).
    Exact dtypes had no norm and passed whatever they held: an int32 output half unwritten on
    every bare call after timing passed that check (a red-team kernel on the CPU, 2026-11-26)."""
    def gross(m: Mismatch) -> bool:
        if m.kind not in ("value", "norm"):
            return True
        if m.rel_norm_err is not None:
            return m.rel_norm_err > GROSS_NORM
        return m.n_total > 0 and m.n_bad / m.n_total > GROSS_SHARE
    return [m for m in diffs if gross(m)]


def rounds_at_other_warps(reference: types.ModuleType, case: Case, seed: int,
                          make_invocation: MakeInvocation, device: str,
                          compare: Callable[[Any, Any, str], list[Mismatch]],
                          inputs: dict[str, torch.Tensor] | None,
                          sync: Callable[[], None] | None,
                          masks: dict[str, torch.Tensor] | None = None) -> bool:
    """Whether the original's bare result on (case, seed), ``inputs`` imposed, leaves the
    tolerance when its kernels run at another num_warps (``config_variation.schedule_sensitive``):
    then a candidate's bare call there is held to gross differences only."""
    def call() -> tuple[Any, dict[str, torch.Tensor]]:
        return bare_outputs(reference, case, seed, make_invocation, device, inputs, sync)

    def differs(a: Any, b: Any) -> bool:
        return bool(candidate_bare_diffs(a, b, masks or {}, compare, False))
    return schedule_sensitive(reference, case, call, differs)


@dataclass(frozen=True)
class OriginalBare:
    """The original's side of ``shipped_after_timing`` on one (case, seed): its bare call
    (``bare_outputs``), the elements it leaves unwritten and whether a second bare call agreed
    bit for bit. It depends on nothing a candidate does, so the worker takes it once and judges
    every timed candidate of a request against it (``original_bare``): taken again for each,
    it was four calls of the original a candidate, and bmm_chunk_fwd's check after a round's
    timing took 45 s for 16 candidates (two H200s, 2026-11-28)."""

    ref: tuple[Any, dict[str, torch.Tensor]]
    masks: dict[str, torch.Tensor]
    exact: bool


def original_bare(reference: types.ModuleType, case: Case, seed: int,
                  make_invocation: MakeInvocation, device: str,
                  compare: Callable[[Any, Any, str], list[Mismatch]]) -> OriginalBare | None:
    """The original's side of the check on (case, seed); None where it judges nothing: it
    touches memory outside its arguments (``verify.bounds``), or its second bare call differs
    from its first (``original_bare_view``)."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else None
    if outside(reference, case, seed, make_invocation, device, sync):
        return None          # its results depend on where memory was handed out (verify.bounds)
    ref = bare_outputs(reference, case, seed, make_invocation, device, None, sync)
    exact: list[bool] = []
    masks, agrees = original_bare_view(reference, case, seed, make_invocation, device, compare,
                                       ref, sync, exact)
    if not agrees:
        return None          # the original run again differs from itself: it judges nothing
    return OriginalBare(ref, masks, all(exact))


def shipped_after_timing(reference: types.ModuleType, candidate: types.ModuleType, case: Case,
                         seed: int, make_invocation: MakeInvocation, device: str,
                         compare: Callable[[Any, Any, str], list[Mismatch]],
                         original: OriginalBare | None = None) -> str | None:
    """After the timer called the candidate many times (bare, as it ships), one more bare call
    on fresh inputs must still match the original's (``candidate_bare_diffs``, nothing where
    the original run again differs from itself: ``original_bare_view``); None if so, else why
    not. ``original``: the original's side already taken on (case, seed) (``original_bare``),
    else it is taken here."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else None
    if original is None:
        original = original_bare(reference, case, seed, make_invocation, device, compare)
        if original is None:
            return None
    ref, masks = original.ref, original.masks
    inputs = inputs_of(ref[1])
    cand = bare_outputs(candidate, case, seed, make_invocation, device, inputs, sync)
    diffs = candidate_bare_diffs(ref, cand, masks, compare, rounding=False)
    if not diffs:
        return None
    if may_round_otherwise(reference, candidate) or not original.exact or \
            rounds_at_other_warps(reference, case, seed, make_invocation, device, compare,
                                  inputs, sync, masks):
        gross = gross_only(diffs)
        if not gross:
            return _unlike_itself_watched(candidate, case, seed, make_invocation, device,
                                          compare, inputs, cand, masks)
        diffs = gross
    return (f"watched: after the timing runs, a bare call on case {case.id} seed {seed} differs "
            f"from the original's: {diffs[0].output}: {diffs[0].message}")


def _unlike_itself_watched(candidate: types.ModuleType, case: Case, seed: int,
                           make_invocation: MakeInvocation, device: str,
                           compare: Callable[[Any, Any, str], list[Mismatch]],
                           inputs: dict[str, torch.Tensor],
                           cand: tuple[Any, dict[str, torch.Tensor]],
                           masks: dict[str, torch.Tensor]) -> str | None:
    """Where a candidate's bare call differs from the original's only as another config's
    rounding might, it must round the same way when watched: one call of it under every guard
    (``verify.runner``) on the same inputs, in the same process (an autotuner's pick is the one
    the bare call used), compared with its bare call at the task's tolerance. A candidate exact
    under the guards that rounds coarsely only when it finds none (fp16 accumulation on the
    shipped path) hid inside the gross-difference forgiveness before; an honest candidate's
    kernels round alike watched or not (the guards change no arithmetic). Why it differs, or
    None; a guarded call that fails judges nothing here (the guarded checks ran before)."""
    try:
        run = run_variant(candidate, case, seed, make_invocation, device, inputs=inputs)
    except Exception as exc:  # noqa: BLE001 - an invocation that cannot be rebuilt alike
        run = Run(error=exc)
    if run.error is not None:
        log.info("case %s: the candidate's guarded call after timing failed: %s", case.id,
                 run.error)
        return None
    guarded = (run.result, run.args | {f"input {p}": t for p, t in inputs.items()})
    diffs = candidate_bare_diffs(guarded, cand, masks, compare, rounding=False)
    if not diffs:
        return None
    return (f"watched: after the timing runs, a bare call on case {case.id} seed {seed} differs "
            f"from its own call under the verifier's guards on the same inputs (not another "
            f"config's rounding): {diffs[0].output}: {diffs[0].message}")


__all__ = ["ProbePlan", "ProbeRun", "bare_outputs", "compare_probe",
           "candidate_bare_diffs", "disagrees_with_itself", "gross_only", "inputs_of", "masked",
           "original_bare_view", "plan_probe", "rounds_at_other_warps", "run_probe",
           "OriginalBare", "original_bare", "shipped_after_timing", "unwritten_masks"]
