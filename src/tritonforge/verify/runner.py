"""Run one variant on one (case, seed) under every guard, and keep what the verifier compares.

A run builds the invocation, imposes the original's inputs where the builder's differ (so both
sides start from identical bits), poisons the buffers it was told are pure outputs, seeds the RNGs,
then calls the variant with launches counted, torch calls recorded and allocations poisoned.
What the call returned and every tensor argument are cloned at once (on a GPU, ordered on the
caller's stream: what a consumer would see). For the race check the floating-point inputs nobody
writes are then overwritten, the device synchronized, and the outputs cloned again: a variant that
left work on a side stream, or reads its inputs after returning, shows a difference.
"""

from __future__ import annotations

import logging
import random
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np
import torch

from ..model import Case
from .freshness import (
    changed_names, module_tensors, returned_aliases, returned_tensors, state_fingerprint,
    subclassed,
)
from .guards import LaunchCounter, TorchCallRecorder, count_launches, record_torch_calls
from .poison import hold_poisoned, poison_, poison_allocations
from .tree import bitwise_equal, clone_tree, iter_tensors, shares_memory

log = logging.getLogger(__name__)


class InvocationLike(Protocol):
    """What ``runtime.invoke`` builds: a zero-argument call and the arguments it receives."""

    call: Callable[[], Any]
    arguments: list[Any]


MakeInvocation = Callable[[types.ModuleType, Case, int, str], InvocationLike]


@dataclass
class Run:
    """One call of one variant: its outputs as cloned when it returned, and what it did."""

    result: Any = None
    args: dict[str, torch.Tensor] = field(default_factory=dict)      # after the call
    pristine: dict[str, torch.Tensor] = field(default_factory=dict)  # before (reference runs)
    late_result: Any = None          # after inputs were overwritten and the device synchronized
    late_args: dict[str, torch.Tensor] | None = None
    launches: LaunchCounter = field(default_factory=LaunchCounter)
    calls: TorchCallRecorder = field(default_factory=TorchCallRecorder)
    error: BaseException | None = None
    rebuilt_inputs: bool = False     # the builder gave other inputs than the reference's
    aliases: tuple[tuple[str, str], ...] = ()     # (return path, arg path | module | earlier call)
    subclasses: tuple[tuple[str, str], ...] = ()  # (return path, type) not exactly torch.Tensor
    state_changed: tuple[str, ...] = ()           # module globals the call changed
    returned: list[torch.Tensor] = field(default_factory=list)   # the objects returned (no clone)


def _seed(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))


def _kept(t: Any, known: torch.Tensor | None) -> Any:
    """A clone of argument ``t`` as it is now, or ``known`` itself where ``t`` still holds its
    exact bits (an input nobody wrote): a run keeps what it compares, and one more copy of every
    read-only input per run put a KV-cache copy's verification (4 GiB of arguments a call) out
    of an H100's memory (76 GiB held, 2026-11-26). The kept tensors are never written."""
    if isinstance(t, torch.Tensor) and isinstance(known, torch.Tensor) and bitwise_equal(t, known) \
            and t.stride() == known.stride() and t.requires_grad == known.requires_grad:
        return known
    return clone_tree(t)


def run_variant(
    module: types.ModuleType,
    case: Case,
    seed: int,
    make_invocation: MakeInvocation,
    device: str,
    *,
    poison: frozenset[str] = frozenset(),
    inputs: dict[str, torch.Tensor] | None = None,
    scramble: frozenset[str] = frozenset(),
    synchronize: Callable[[], None] | None = None,
    keep_pristine: bool = False,
    earlier: list[torch.Tensor] | None = None,
) -> Run:
    """Run ``module`` on ``case`` with ``seed``; see the module docstring.

    ``poison``: argument paths (``arg[1]``) to poison before the call. ``inputs``: the bits every
    argument must hold before the call (the reference's). ``scramble``: argument paths to
    overwrite after the call for the race check; with ``synchronize`` the late clones are taken.
    ``earlier``: tensors an earlier call returned (a result must not share memory with them).
    """
    run = Run()
    invocation = make_invocation(module, case, seed, device)
    tensors = dict(iter_tensors(invocation.arguments, "arg"))
    if inputs is not None:
        if set(inputs) != set(tensors):
            raise ValueError(f"case {case.id} seed {seed}: the invocation builder gave arguments "
                             f"{sorted(tensors)} for one variant and {sorted(inputs)} for another")
        with torch.no_grad():
            for path, t in tensors.items():
                if not bitwise_equal(t, inputs[path]):
                    t.copy_(inputs[path])
                    run.rebuilt_inputs = True
        if run.rebuilt_inputs:
            log.warning("case %s seed %s: inputs differ between builds; the original's imposed",
                        case.id, seed)
    if keep_pristine:
        run.pristine = {p: clone_tree(t) for p, t in tensors.items()}
    for path in poison:
        poison_(tensors[path])
    _seed(seed)
    state_before = state_fingerprint(module)
    try:
        # poisoning outside recording: the poison's own fill_ is not the variant's work
        with count_launches() as launches, poison_allocations(), record_torch_calls() as calls:
            result = invocation.call()
    except BaseException as exc:  # noqa: BLE001 - the caller decides what a failure is
        run.error = exc
        run.launches, run.calls = launches, calls
        return run
    run.launches, run.calls = launches, calls
    run.state_changed = changed_names(state_before, state_fingerprint(module))
    run.subclasses = subclassed(result)
    run.aliases = returned_aliases(result, tensors, module_tensors(module), earlier or ())
    run.returned = returned_tensors(result)
    run.result = clone_tree(result)
    known = run.pristine if keep_pristine else (inputs or {})
    run.args = {p: _kept(t, known.get(p)) for p, t in tensors.items()}
    hold_poisoned(_clones(run.result, run.args))
    if synchronize is None:
        return run
    returned = [t for _, t in iter_tensors(result, "return")]
    with torch.no_grad():
        for path in scramble:
            t = tensors[path]
            if not any(shares_memory(t, r) for r in returned):
                poison_(t)
    synchronize()
    run.late_result = clone_tree(result)
    run.late_args = {p: _kept(t, run.args[p]) for p, t in tensors.items() if p not in scramble}
    hold_poisoned(_clones(run.late_result, run.late_args))
    return run


def _clones(result: Any, args: dict[str, Any]) -> list[torch.Tensor]:
    return [t for _, t in iter_tensors(result, "return")] + \
        [t for p, a in args.items() for _, t in iter_tensors(a, p)]
