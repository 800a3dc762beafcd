"""What the timer's own calls returned: a candidate must be right inside the timed loop too.

Every other check calls a variant spaced by clones, comparisons and synchronisations; the timer
calls it back to back, many times, with nothing in between but an L2 flush and CUDA events. A
candidate that can tell the two apart (the GPU's clock read in a kernel, the host's clock, a
queue that is busy only while the timer runs, a call counter) can be right whenever it is
watched and wrong, and fast, exactly when it is timed. The static policy refuses the ways we
know of (rules ``clock`` and ``harness``); this is the dynamic check that needs no list:

- ``TimedCalls.keeping(name, fn)`` wraps a variant's timed callable so the LAST value it returned
  stays alive (one result per variant; the previous one is dropped as the next arrives). In a
  CUDA graph the result of the captured call is the graph's output memory, so it holds what the
  last replay wrote.
- ``TimedCalls.differences(...)``, after a case is timed, compares each candidate's last timed
  result with the original's. It judges only where the original's result does not depend on how
  often it ran: the original is called once more, and if that call's result differs from its last
  timed one beyond the tolerance (it accumulates, it races), or differs at all where it is one of
  its arguments, nothing is compared: lora_expand_gemv's performance script returns the fp16
  output it adds into, one more call moved 8224 to 8240 (inside 1%), and every candidate the
  timer called more often than the original was refused as ``watched`` (H100, 2026-11-27). The elements the
  original never writes (``shipped.unwritten_masks``: a wrapper's ``torch.empty`` left partly
  unwritten holds whatever memory held) are masked, and value differences count only beyond
  ``GROSS_NORM`` where an autotuner (the candidate's or the original's) may run another config
  than verification saw, or where the original's own runs differ at all (atomics), as in the
  other bare-call checks; otherwise every difference beyond the tolerance counts
  (``config_variation.may_round_otherwise``).

What it cannot see: the timer calls a variant on the same inputs again and again, so a
candidate that skips work when timed and leaves a ``torch.empty`` buffer's elements as memory
left them may find a recent call's right values there (a red-team kernel on the CPU passed this
check in some runs, depending on which block the allocator handed back). Nothing is poisoned
inside the timed loop (it would be timed); the bare call after timing, on fresh inputs, and the
static policy (the ways to tell the timer's calls apart) are the walls there.

Results written into arguments are judged too, where that is sound: the original's arguments
are copied before its first timed call (``pristine``); after timing, an argument whose elements
the original's calls changed, and that one more call of the original leaves bit for bit as it was
(not an accumulation, however small), and that one call on the pristine arguments would
also have left within the tolerance (``_grew_in_the_loop``: not an accumulation that has
saturated), is compared with the candidate's own argument on the changed elements (a
candidate's buffer from ``torch.empty`` holds other garbage where the original writes nothing).
An argument both variants share (one tensor) judges nothing. Copies beyond
``KEEP_SHARE_OF_DEVICE`` of the device's memory are not made: the check is skipped there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..model import Mismatch
from .shipped import gross_only, masked
from .tree import bitwise_equal, clone_tree, iter_tensors, same_bits, shares_memory

# a kept result larger than this share of the device's memory is not kept (the check is skipped
# for that variant on that case: keeping it could run the timing out of memory)
KEEP_SHARE_OF_DEVICE = 0.125


def _nbytes(tree: Any) -> int:
    return sum(t.numel() * t.element_size() for _, t in iter_tensors(tree, "return"))


def _limit_bytes() -> float:
    if torch.cuda.is_available():
        return KEEP_SHARE_OF_DEVICE * torch.cuda.get_device_properties(
            torch.cuda.current_device()).total_memory
    return float("inf")


def _changed(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """Where ``after`` differs from ``before`` (NaN where both are NaN is no change)."""
    same = before == after
    if before.is_floating_point() or before.is_complex():
        same |= torch.isnan(before) & torch.isnan(after)
    return ~same


def _into_arguments(result: Any, arguments: dict[str, torch.Tensor]) -> bool:
    """Whether a returned tensor is (a view of) one of the call's arguments."""
    return any(shares_memory(t, a) for _, t in iter_tensors(result, "return")
               for a in arguments.values())


@dataclass
class TimedCalls:
    """The last result of each variant's timed calls on one case, and their arguments."""

    last: dict[str, Any] = field(default_factory=dict)
    too_big: set[str] = field(default_factory=set)
    limit_bytes: float = field(default_factory=_limit_bytes)
    args: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    pristine: dict[str, torch.Tensor] = field(default_factory=dict)
    grew: bool = False       # the last ``differences`` stood down: the original grew in the loop

    def keeping(self, name: str, fn: Callable[[], Any],
                arguments: dict[str, torch.Tensor] | None = None,
                reference: bool = False) -> Callable[[], Any]:
        """``fn`` wrapped to keep its last result; ``arguments``: its invocation's tensors (the
        reference's are copied now, before its first timed call)."""
        if arguments:
            self.args[name] = arguments
            if reference and sum(t.numel() * t.element_size() for t in arguments.values()) \
                    * 2 <= self.limit_bytes:
                self.pristine = {p: t.detach().clone() for p, t in arguments.items()}

        def timed() -> Any:
            self.last.pop(name, None)        # the previous result goes before the next is made
            out = fn()
            if name not in self.too_big:
                if _nbytes(out) > self.limit_bytes:
                    self.too_big.add(name)
                else:
                    self.last[name] = out
            return out
        return timed

    def differences(self, reference: str, call_reference: Callable[[], Any],
                    compare: Callable[[Any, Any, str], list[Mismatch]],
                    unwritten: Callable[[], dict[str, torch.Tensor]],
                    sync: Callable[[], None] | None,
                    rounding: Callable[[str], bool] = lambda name: True,
                    rounds_elsewhere: Callable[[], bool] = lambda: False,
                    replay_steps: Callable[[], None] | None = None
                    ) -> dict[str, list[Mismatch]]:
        """{candidate: its differences from the original's last timed result}, for every
        candidate whose last timed result was kept; {} where the original's result depends on
        how often it ran (or was not kept). Only gross ones (``shipped.gross_only``) where
        ``rounding(candidate)`` (an autotuner, its or the original's, may have picked another
        config than verification saw) or where differences beyond the tolerance turn up and
        ``rounds_elsewhere()`` says the original's own result leaves it at another num_warps
        (asked only then: ``config_variation.schedule_sensitive``); every one beyond the
        tolerance otherwise. ``replay_steps``: takes the input steps the timer took on the
        original's arguments (``runtime.varied_inputs``) again, once they are restored."""
        if reference not in self.last:
            return {}
        if sync is not None:
            sync()
        ref = clone_tree(self.last[reference])
        ref_args = self.args.get(reference, {})
        before = {p: ref_args[p].detach().clone() for p in self.pristine if p in ref_args}
        again = call_reference()
        if sync is not None:
            sync()
        judge_return = not compare(ref, again, "return")
        # an original whose own runs differ at all (atomics' order) is judged as if it rounded
        wobbles = not same_bits(ref, again)
        if wobbles and _into_arguments(again, ref_args):
            judge_return = False      # it returns what it adds into: one more call moved it
        del again
        written = {}
        for p, kept in before.items():
            if not bitwise_equal(kept, ref_args[p]):
                continue              # one more call moved it: it depends on the call count
            mask = _changed(self.pristine[p], kept)
            if bool(mask.any()):
                written[p] = (kept, mask)
        if self._grew_in_the_loop(ref, before, ref_args, call_reference, compare, sync,
                                  replay_steps):
            self.grew = True
            return {}
        masks: dict[str, torch.Tensor] | None = None
        found = {}
        for name, result in self.last.items():
            if name == reference:
                continue
            rounds = wobbles or rounding(name)

            def judged(diffs: list[Mismatch], rounds: bool = rounds) -> list[Mismatch]:
                return gross_only(diffs) if rounds else diffs
            diffs = judged(compare(ref, result, "return")) if judge_return else []
            if diffs and masks is None:
                masks = unwritten()
            if diffs and masks:
                diffs = judged(compare(masked(ref, masks), masked(result, masks), "return"))
            theirs = self.args.get(name, {})
            for p, (kept, mask) in written.items():
                cand = theirs.get(p)
                if cand is None or cand.shape != kept.shape or cand.dtype != kept.dtype or \
                        cand.device != kept.device or shares_memory(cand, ref_args[p]):
                    continue
                diffs += judged(compare(kept[mask], cand.detach()[mask], p))
            if diffs and not rounds and rounds_elsewhere():
                diffs = gross_only(diffs)
            if diffs:
                found[name] = diffs
        return found

    def _grew_in_the_loop(self, ref: Any, before: dict[str, torch.Tensor],
                          ref_args: dict[str, torch.Tensor], call_reference: Callable[[], Any],
                          compare: Callable[[Any, Any, str], list[Mismatch]],
                          sync: Callable[[], None] | None,
                          replay_steps: Callable[[], None] | None) -> bool:
        """Whether the original's last timed result (``ref``, and its arguments as they stood
        then, ``before``) differs beyond the tolerance from what ONE call on its pristine
        arguments gives: it accumulates across calls, even where one more call no longer moves
        it. An fp16 output added into saturates (bgmv_shrink_kernel on an H100, 2026-11-27: at
        about 23000 one call's increment is below half a unit in the last place, so one more call
        left it bit for bit the same; a candidate with half the split-K partials, each twice as
        large, still grew and reached inf, and was refused as ``watched``). The arguments are
        restored from ``pristine`` and take the timer's input steps again (``replay_steps``), so
        that call sees the inputs the last timed call saw; without a pristine copy (too large to
        keep) the one-more-call test above stands alone."""
        if not self.pristine or any(p not in ref_args for p in self.pristine):
            return False
        with torch.no_grad():
            for p, t in self.pristine.items():
                ref_args[p].copy_(t)
        if replay_steps is not None:
            replay_steps()
        once = call_reference()
        if sync is not None:
            sync()
        if compare(ref, once, "return"):
            return True
        return any(compare(kept, ref_args[p], p) for p, kept in before.items())

    def clear(self) -> None:
        self.last.clear()
        self.too_big.clear()
        self.args.clear()
        self.pristine = {}
        self.grew = False


__all__ = ["KEEP_SHARE_OF_DEVICE", "TimedCalls"]
