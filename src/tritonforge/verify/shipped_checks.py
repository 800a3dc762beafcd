"""The verifier's checks of what ships, beside its guarded comparisons (verify.differential).

``ShippedChecks`` is a part of the verifier: per candidate call, aliasing, subclasses and module
state (verify.freshness); once per verification, the bare-call probe (verify.shipped) judged step
by step and the profiler's op census (verify.census). It uses the verifier's bookkeeping
(``cheat``, ``compare``, ``_layout``, ``_integrity``, ``_error`` and the reference's recorded
ops), so it is a mixin, not a module of functions.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import types
import weakref
from typing import Any, Sequence

import torch

from ..model import Case, Mismatch
from .bounds import Outside, outside, outside_note
from .census import PROFILER_PLUMBING, foreign_kernels
from .config_variation import may_round_otherwise
from .integrity import integrity_snapshot
from .kinds import CheatKind
from .original_runs import case_key, tree_bytes
from .poison import scrub_released
from .runner import Run
from .shipped import (
    bare_outputs, candidate_bare_diffs, compare_probe, disagrees_with_itself, gross_only,
    inputs_of, masked, original_bare_view, plan_probe, rounds_at_other_warps, run_probe,
    unwritten_masks,
)

log = logging.getLogger(__name__)

BARE_FIRST_CASES = 4      # correctness cases the candidate's first, bare calls run on
BARE_KEEP_BYTES = 256 << 20   # the original's side of one case is kept only up to this size


@dataclasses.dataclass
class OriginalBare:
    """The original's side of a bare first call on one (case, seed): its cloned result and
    arguments (``bare_outputs``), then what judging a candidate needs (``original_bare_view``);
    ``failed``: the original itself fails there (the guarded checks' to report)."""
    result: Any = None
    args: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
    masks: dict[str, torch.Tensor] | None = None
    agrees: bool | None = None
    exact: list[bool] = dataclasses.field(default_factory=list)   # its two calls bit for bit
    failed: bool = False


def _out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, (MemoryError, torch.cuda.OutOfMemoryError)) or \
        "out of memory" in str(exc).lower()


# The original's bare first calls, per original module and (case, seed, device), for the worker's
# life. A worker checks every candidate with the same nonce, so each one's first calls come on the
# same seed, and the original's three calls a case there (its bare call, a poisoned one for the
# unwritten elements, one more to see whether it agrees with itself) were the same every time.
# The candidate cannot reach what is kept: it gets inputs of its own, copied from these.
_ORIGINAL_BARE: "weakref.WeakKeyDictionary[types.ModuleType, dict[tuple, OriginalBare]]" = \
    weakref.WeakKeyDictionary()

# aten ops that allocate, view, copy, pad, concatenate or fill (data movement, no arithmetic on the
# inputs): a candidate may use them although the original does not.
PLUMBING_OPS = frozenset({
    "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty",
    "aten.new_empty_strided", "aten.empty_permuted", "aten.zeros", "aten.zeros_like",
    "aten.new_zeros", "aten.ones", "aten.ones_like", "aten.new_ones", "aten.full",
    "aten.full_like", "aten.new_full", "aten.fill_", "aten.zero_", "aten.scalar_tensor",
    "aten.view", "aten._unsafe_view", "aten.reshape", "aten._reshape_alias", "aten.as_strided",
    "aten.expand", "aten.permute", "aten.transpose", "aten.t", "aten.unsqueeze", "aten.squeeze",
    "aten.slice", "aten.select", "aten.split", "aten.split_with_sizes", "aten.unbind",
    "aten.chunk", "aten.narrow", "aten.flatten", "aten.unflatten", "aten.unfold", "aten.alias",
    "aten.view_as", "aten.detach", "aten.lift_fresh", "aten.clone", "aten.contiguous",
    "aten.copy_", "aten._to_copy", "aten.to", "aten._local_scalar_dense", "aten.is_contiguous",
    "aten.stride", "aten.size", "aten.sym_size", "aten.sym_stride", "aten.sym_numel",
    "aten.numel", "aten.dim", "aten.resize_", "aten.set_", "aten.is_same_size",
    "aten.record_stream", "aten.arange", "aten.cat", "aten.stack", "aten.constant_pad_nd",
})


class ShippedChecks:
    """Mixed into ``differential._Verifier``; see the module docstring."""

    cand_earlier: list[torch.Tensor]

    def _freshness(self, cand: Run, case: Case, seed: int) -> None:
        """Aliasing, subclasses and module state of one candidate call (verify.freshness)."""
        # the original returns an argument of an in-place op: the candidate may, the same one
        bad = [(p, w) for p, w in cand.aliases if (p, w) not in self.ref_aliases]
        if bad:
            p, w = bad[0]
            self.cheat(CheatKind.ALIASED, f"{p} shares memory with "
                                          f"{'an input, ' + w if w.startswith('arg') else w}, "
                                          f"where the original's result does not: a later call "
                                          f"or a change of the input changes it", case, seed)
        sub = [x for x in cand.subclasses if x not in self.ref_subclasses]
        if sub:
            self.cheat(CheatKind.SUBCLASS, f"{sub[0][0]} is a {sub[0][1]}, not a plain "
                                           f"torch.Tensor as the original returns", case, seed)
        if cand.state_changed and case.id in self.cand_seen and not self.ref_state_repeats:
            self.cheat(CheatKind.CALL_STATE, f"a repeated call changed its module state "
                                             f"({', '.join(cand.state_changed[:4])}): it counts "
                                             f"calls or keeps per-call state", case, seed)
        self.cand_seen.add(case.id)
        self.cand_earlier = cand.returned

    # ------------------------------------------------------------------ first call, bare
    def bare_first(self, cases: Sequence[Case], nonce: int, seed: int) -> str | None:
        """The candidate's FIRST calls of the verification, bare (no poisoned outputs, no
        recorder), on up to ``BARE_FIRST_CASES`` correctness cases against the original's bare
        calls (judged by ``verify.shipped.candidate_bare_diffs``): None if they match, else
        why not.
        The original's side is made once per (case, seed) in a worker (``_ORIGINAL_BARE``).
        Made before any guarded call, since a candidate can see the guards (a poisoned
        ``torch.empty`` reads back its pattern) and latch into honest behaviour for the rest of the process: such a
        candidate passed every guarded check and the later bare probe, and returned its input
        unchanged in a process with no verifier (a red-team attack on the CPU interpreter,
        2026-11-26). ``verify`` holds what this returns against the candidate only when every
        guarded check passed: there it is ``watched``; a plainly wrong candidate keeps the
        mismatch its guarded checks find.

        The last performance case among ``cases`` is made bare too: a candidate that latches
        and cheats only past the correctness cases' sizes (half the work above 4096 elements,
        unwatched) passed every check with correctness cases alone here (a red-team attack on
        the CPU interpreter, 2026-11-26). Out of memory there (its inputs beside the original's
        kept outputs) judges nothing: an exception in a user's process is not a wrong result."""
        correct = [c for c in cases if c.role.value == "correctness"]
        pool = correct or list(cases)
        picked = random.Random(nonce).sample(pool, min(BARE_FIRST_CASES, len(pool)))
        largest = [c for c in cases if c.role.value != "correctness"][-1:] if correct else []
        picked += largest
        scrub_released(collect=True)     # no earlier check's poison left in freed memory to find
        sync = torch.cuda.synchronize if self.device.startswith("cuda") else None
        # every candidate call comes before anything poisoned runs in this process: the
        # unwritten-element masks poison the original's outputs, and freed poisoned memory
        # handed to the candidate's own torch.empty would show it the guard
        kept = _ORIGINAL_BARE.setdefault(self.reference, {})
        runs = []
        for case in picked:
            if self._outside(case, seed, sync):
                continue         # neither variant's bare call there is run: it would scribble
            key = (case_key(case), seed, self.device)
            known = kept.setdefault(key, OriginalBare())
            if known.failed:
                continue
            if known.masks is None:
                try:
                    known.result, known.args = bare_outputs(self.reference, case, seed,
                                                            self.make_invocation, self.device,
                                                            None, sync)
                except Exception:  # noqa: BLE001 - the original's failure: the guarded checks' to report
                    known.failed = True
                    continue
            inputs = inputs_of(known.args)
            try:
                result, args = bare_outputs(self.candidate, case, seed, self.make_invocation,
                                            self.device, inputs, sync)
            except Exception as exc:  # noqa: BLE001 - raising only when unwatched is the cheat's
                if case in largest and _out_of_memory(exc):
                    continue
                return (f"the first calls, bare, on case {case.id} seed {seed} raised "
                        f"{type(exc).__name__}: {str(exc)[:200]}")
            runs.append((case, key, known, (result, args)))
        for case, key, known, cand in runs:
            compare = lambda a, b, path, c=case: self.compare(a, b, c, seed, path)  # noqa: E731
            ref = (known.result, known.args)
            if known.masks is None:
                try:
                    known.masks, known.agrees = original_bare_view(
                        self.reference, case, seed, self.make_invocation, self.device, compare,
                        ref, sync, known.exact)
                except Exception:  # noqa: BLE001 - the original failing here: nothing judged
                    known.failed = True
                    continue
            if tree_bytes((known.result, known.args, known.masks)) > BARE_KEEP_BYTES:
                kept.pop(key, None)          # too large to keep in a worker: made again next time
            if not known.agrees:
                continue
            diffs = candidate_bare_diffs(ref, cand, known.masks, compare,
                                         not all(known.exact)
                                         or may_round_otherwise(self.reference, self.candidate))
            if diffs and rounds_at_other_warps(self.reference, case, seed, self.make_invocation,
                                               self.device, compare, inputs_of(known.args),
                                               sync, known.masks):
                diffs = gross_only(diffs)
            if diffs:
                return (f"the first calls, bare, on case {case.id} seed {seed} differ from the "
                        f"original's: {diffs[0].output}: {diffs[0].message}")
        return None

    def _outside(self, case: Case, seed: int, sync: Any) -> Outside:
        """What the original does outside its arguments on ``case`` (``verify.bounds``; false
        if nothing): then bare calls of the two variants there judge nothing (nor, where it
        reads, anything else), and a note says so, once a case."""
        found = outside(self.reference, case, seed, self.make_invocation, self.device, sync)
        if found and case.id not in self.outside_cases:
            self.outside_cases[case.id] = found
            self.unjudged.append(outside_note(case, seed, found))
        return found

    # ------------------------------------------------------------------ bare-call probe
    def probe(self, cases: Sequence[Case], nonce: int, seed: int) -> None:
        """Run one case through bare calls on both variants and judge (verify.shipped)."""
        pool = [c for c in cases if c.role.value == "correctness"] or list(cases)
        case = random.Random(nonce).choice(pool)
        if self._outside(case, seed, self.sync):
            return
        scrub_released()
        layout, _ = self._layout(case, seed)
        plan = plan_probe(case, seed, nonce, layout.outputs,
                          layout.read_only_floats - layout.outputs, self.device,
                          self.options.repeat_runs, layout.written)
        ref = run_probe(self.reference, plan, self.make_invocation, self.device, None,
                        self.sync, trusted=True)
        pristine = ref.inputs or {}
        if ref.error is not None:
            log.info("probe skipped: the original fails on case %s with changed inputs: %s",
                     case.id, ref.error)
            self.nondeterministic.append(f"bare-call probe skipped: the original fails on case "
                                         f"{case.id} with a few inputs changed "
                                         f"({type(ref.error).__name__}: {ref.error})"[:300])
            return
        snapshot = integrity_snapshot()
        cand = run_probe(self.candidate, plan, self.make_invocation, self.device, pristine,
                         self.sync)
        self._integrity(snapshot, case, seed)
        if cand.error is not None:
            self._error(cand.error, case, seed)
            return

        # positions the original leaves unwritten hold stale memory in a bare call: not compared
        masks = unwritten_masks(self.reference, case, plan.seed, self.make_invocation,
                                self.device, pristine, self.sync)

        def compare(r: Any, c: Any, path: str) -> list[Mismatch]:
            if path == "return":
                r, c = masked(r, masks), masked(c, masks)
            return self.compare(r, c, case, seed, path)
        own = disagrees_with_itself(ref, compare)
        if own or self.nondeterministic:
            log.info("probe values not judged: the original differs from itself on case %s",
                     case.id)
        else:
            found = compare_probe(ref, cand, compare)
            if found and rounds_at_other_warps(self.reference, case, plan.seed,
                                               self.make_invocation, self.device, compare,
                                               pristine, self.sync, masks):
                found = [(label, gross_only(d)) for label, d in found if gross_only(d)]
            self._judge_probe(found, case, seed)
        bad = sorted(set(cand.aliases) - set(ref.aliases))
        if bad:
            self.cheat(CheatKind.ALIASED, f"{bad[0][0]} shares memory with an earlier call's "
                                          f"result, where the original's does not", case, seed)
        self._census(ref, cand, case, seed)

    def _judge_probe(self, found: list[tuple[str, list[Mismatch]]], case: Case, seed: int) -> None:
        """The first step that differs names the class: later steps inherit its difference."""
        for label, diffs in found[:1]:
            if label.startswith("bare call"):
                self.cheat(CheatKind.WATCHED, f"right under the verifier's guards, wrong on the "
                                              f"bare call the timer and the user make ({label})",
                           case, seed)
            elif label.startswith("identical run"):
                self.cheat(CheatKind.RACE, f"runs on identical inputs disagree ({label}) where "
                                           f"the original's agree: a race", case, seed)
            else:
                self.cheat(CheatKind.STATEFUL, f"its result does not follow inputs changed "
                                               f"between calls ({label}): a cache or state kept "
                                               f"across calls", case, seed)
            self.mismatches.extend(dataclasses.replace(m, message=f"[{label}] {m.message}")
                                   for m in diffs[:4])

    def _census(self, ref: Any, cand: Any, case: Case, seed: int) -> None:
        if not self.options.check_library_ops or cand.census is None or ref.census is None \
                or not (cand.census.ok and ref.census.ok):
            return
        known = set(ref.census.ops) | set(self.ref_ops) | PLUMBING_OPS | PROFILER_PLUMBING | \
            self.options.allowed_ops
        extra = sorted(op for op in cand.census.ops if op not in known)
        if extra:
            hidden = [op for op in extra if op not in self.cand_ops]
            how = (f"{', '.join(hidden[:4])} hidden from the dispatch recorder" if hidden
                   else "seen by the profiler on a bare call")
            self.cheat(CheatKind.LIBRARY_OP, f"it runs {', '.join(extra[:6])} ({how}), which the "
                                             f"original never uses: the work must be done by "
                                             f"Triton kernels", case, seed)
        foreign = foreign_kernels(cand.census, ref.census, self.candidate)
        if foreign:
            self.cheat(CheatKind.LIBRARY_OP, f"it launches CUDA kernels that are neither its "
                                             f"Triton kernels nor an aten op's: "
                                             f"{', '.join(foreign[:4])}", case, seed)
