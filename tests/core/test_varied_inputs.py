"""Inputs varied between timed turns (runtime.varied_inputs): a variant that memoizes its result
by the inputs' contents gets no hit under the timer, integer inputs are never touched, and the
variants of a case stay in step, so their last timed results stay comparable."""

from __future__ import annotations

import torch

from tritonforge.runtime import timing
from tritonforge.runtime.timing import TimingPlan, time_interleaved_cpu
from tritonforge.runtime.varied_inputs import VariedInputs
from tritonforge.runtime.worker_evaluate import _out_of_step, _varying
from tritonforge.verify.timed_calls import TimedCalls


def _args():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(4, 6, generator=g) + 3.0,
            (torch.rand(3, generator=g) + 0.5).half(),
            torch.arange(5),
            (torch.randn(6, 4, generator=g) + 3.0).t(),     # a non-contiguous view
            2.0]


def _state(v: VariedInputs) -> tuple:
    return tuple(t.float().contiguous().numpy().tobytes() for t in v.tensors)


def test_each_step_halves_one_element_of_each_float_tensor_never_an_integer():
    args = _args()
    ints = args[2].clone()
    v = VariedInputs(args)
    assert [t.dtype for t in v.tensors] == [torch.float32, torch.float16, torch.float32]
    seen = {_state(v)}
    for _ in range(12):
        before = [t.clone() for t in v.tensors]
        v.step()
        for t, b in zip(v.tensors, before):
            changed = t != b
            assert int(changed.sum()) == 1
            assert torch.equal(t[changed] * 2, b[changed])        # halved, nothing else
            assert bool(torch.isfinite(t).all())
        assert _state(v) not in seen                               # no step repeats an input
        seen.add(_state(v))
    assert torch.equal(args[2], ints) and v.steps == 12
    assert VariedInputs([torch.arange(3), 1.0]).tensors == []


def test_copies_of_the_same_inputs_take_the_same_steps():
    a, b = _args(), _args()
    va, vb = VariedInputs(a), VariedInputs(b)
    for _ in range(7):
        va.step()
        vb.step()
        assert all(torch.equal(x, y) for x, y in zip(va.tensors, vb.tensors))


class Memo:
    """Right on every call, and free where the inputs repeat: the result by the inputs' bytes."""

    def __init__(self, x: torch.Tensor):
        self.x, self.cache, self.hits = x, {}, 0

    def __call__(self):
        key = self.x.numpy().tobytes()
        if key in self.cache:
            self.hits += 1
            return self.cache[key].clone()
        out = self.x * 2.0
        self.cache[key] = out
        return out.clone()


class _Event:
    def __init__(self, **kwargs):
        pass

    def record(self):
        pass

    def elapsed_time(self, other):
        return 1.0


def test_the_timers_turns_give_a_memo_no_hit(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    x, y = torch.randn(8, 8) + 3.0, None
    y = x.clone()
    original, memo = (lambda: y * 2.0), Memo(x)
    fns = {"original": original, "memo": memo}
    timing._time_events_turns(fns, ["original", "memo"], 40, lambda: None)
    assert memo.hits == 39                                     # as it was: the same inputs again
    memo.hits = 0
    vary = {"original": VariedInputs([y]).step, "memo": VariedInputs([x]).step}
    samples = timing._time_events_turns(fns, ["original", "memo"], 40, lambda: None, vary=vary)
    assert memo.hits == 0 and len(samples["memo"]) == 40
    assert torch.equal(x, y)                                   # both took the same 40 steps


def test_the_interpreters_rounds_vary_the_inputs_too():
    x = torch.randn(5) + 3.0
    memo = Memo(x)
    time_interleaved_cpu({"memo": memo}, TimingPlan(rounds=3), vary={"memo": VariedInputs([x]).step})
    assert memo.hits == 0


class _Inv:
    def __init__(self, arguments):
        self.arguments = arguments


def test_a_variant_out_of_step_with_the_original_is_not_compared():
    """A variant the timer dropped as far slower took fewer steps: its last result was computed on
    other values and is forgotten, not called a cheat; one in step is kept."""
    invs = {"original": _Inv(_args()), "kept": _Inv(_args()), "dropped": _Inv(_args())}
    varieds = _varying(dict.fromkeys(invs), invs)
    for _ in range(3):
        for name in ("original", "kept"):
            varieds[name].step()
    varieds["dropped"].step()
    kept = TimedCalls()
    kept.last.update({"original": 1, "kept": 2, "dropped": 3})
    _out_of_step(kept, varieds, "original")
    assert set(kept.last) == {"original", "kept"}


def test_a_tensor_two_variants_share_is_not_varied():
    shared = torch.randn(4) + 3.0
    invs = {"original": _Inv([shared, torch.randn(3)]), "c0": _Inv([shared, torch.randn(3)])}
    varieds = _varying(dict.fromkeys(invs), invs)
    assert all(len(v.tensors) == 1 and v.tensors[0] is not shared for v in varieds.values())


def test_a_tensor_that_refuses_the_write_is_dropped_not_raised():
    with torch.inference_mode():
        frozen = torch.randn(4) + 3.0
    v = VariedInputs([frozen, torch.randn(3) + 3.0])
    assert len(v.tensors) == 2
    v.step()                                   # outside inference mode: the write is refused
    assert len(v.tensors) == 1 and v.tensors[0] is not frozen


def test_a_replay_on_restored_inputs_takes_the_same_steps_again():
    """``replay`` after a restore leaves the inputs as the steps left them (the timed-call check
    calls the original once on what its last timed call saw, verify.timed_calls)."""
    x = torch.randn(7, 5)
    pristine = x.clone()
    varied = VariedInputs((x, torch.arange(3)))
    for _ in range(40):
        varied.step()
    stepped = x.clone()
    assert not torch.equal(stepped, pristine)
    x.copy_(pristine)
    varied.replay()
    assert torch.equal(x, stepped) and varied.steps == 40


def _int_args():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 50, (6, 40), generator=g),               # indices, unsorted rows
            torch.tensor([0, 4, 9, 15, 22]),                           # offsets: sorted, kept
            torch.tensor([[3, -1, 7, -1, 2, 5, -1, 8]]).t(),          # one column, -1 padding
            3]


def test_integer_only_inputs_are_varied_by_swaps_that_keep_each_rows_values():
    """Where no floating-point tensor can be halved, an integer tensor's step swaps an inverted
    pair of non-negative elements of one row: every value stays one the row held (an index in
    bounds stays in bounds), no state comes back, and a sorted tensor (offsets) and the -1
    padding never move."""
    args = _int_args()
    before = [a.clone() for a in args[:3]]
    v = VariedInputs(args)
    assert [t is a for t, a in zip(v.tensors, (args[0], args[2]))] == [True, True]
    seen = {_state(v)}
    for _ in range(30):
        rows = [t.clone() for t in v.tensors]
        v.step()
        for t, r in zip(v.tensors, rows):
            moved = (t != r).nonzero()
            # one swap a step; the padded column has three inverted pairs to undo, then none
            assert moved.shape[0] == 2 or (t is args[2] and moved.shape[0] == 0)
            assert torch.equal(t.sort(dim=0 if t is args[2] else 1).values,
                               r.sort(dim=0 if t is args[2] else 1).values)
        assert _state(v) not in seen                                    # no state comes back
        seen.add(_state(v))
    assert torch.equal(args[1], before[1])                              # offsets untouched
    assert torch.equal(args[2] < 0, before[2] < 0)                      # padding where it was
    assert args[2][args[2] >= 0].tolist() == [2, 3, 5, 7, 8]
    assert torch.equal(args[0].sort(dim=1).values, before[0].sort(dim=1).values)


def test_integers_stay_untouched_beside_a_float_and_sorted_or_constant_ones_always():
    assert VariedInputs([torch.arange(3), 1.0]).tensors == []
    assert VariedInputs([torch.arange(10).flip(0), torch.zeros(4, 4, dtype=torch.int32)]).tensors == []
    ints = torch.randint(0, 9, (5, 5))
    assert VariedInputs([ints, torch.randn(3)]).tensors[0].is_floating_point()


def test_copies_of_integer_inputs_take_the_same_steps_and_replay_them():
    a, b = _int_args(), _int_args()
    va, vb = VariedInputs(a), VariedInputs(b)
    for _ in range(9):
        va.step()
        vb.step()
        assert all(torch.equal(x, y) for x, y in zip(va.tensors, vb.tensors))
    stepped = a[0].clone()
    a[0].copy_(_int_args()[0])
    a[2].copy_(_int_args()[2])
    va.replay()
    assert torch.equal(a[0], stepped)


def test_the_timers_turns_give_a_memo_on_integer_inputs_no_hit(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    x = torch.randint(0, 1000, (16, 16))
    y = x.clone()
    memo = Memo(x)
    fns = {"original": (lambda: y * 2), "memo": lambda: _int_memo(memo)}
    vary = {"original": VariedInputs([y]).step, "memo": VariedInputs([x]).step}
    timing._time_events_turns(fns, ["original", "memo"], 40, lambda: None, vary=vary)
    assert memo.hits == 0
    assert torch.equal(x, y)


def _int_memo(memo: Memo):
    key = memo.x.numpy().tobytes()
    if key in memo.cache:
        memo.hits += 1
        return memo.cache[key].clone()
    memo.cache[key] = memo.x * 2
    return memo.cache[key].clone()


class IncrementalMemo:
    """Right on every call, and cheap where little changed since its last call: it keeps its last
    inputs and result and redoes only the output rows and columns that a changed element of A or
    B reaches (one of each for one changed element), which one comparison of the inputs finds."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor):
        self.a, self.b, self.last, self.cheap = a, b, None, 0

    def __call__(self):
        if self.last is not None:
            rows = (self.a != self.last[0]).any(dim=1).nonzero().flatten()
            cols = (self.b != self.last[1]).any(dim=0).nonzero().flatten()
            if len(rows) < self.a.shape[0] // 4 and len(cols) < self.b.shape[1] // 4:
                self.cheap += 1
                out = self.last[2].clone()
                out[rows] = self.a[rows] @ self.b
                out[:, cols] = self.a @ self.b[:, cols]
                self.last = (self.a.clone(), self.b.clone(), out)
                return out
        out = self.a @ self.b
        self.last = (self.a.clone(), self.b.clone(), out)
        return out


def test_a_step_changes_every_row_of_a_wide_matrix_and_keeps_its_values():
    """Halving one element let a variant redo one row of its output per turn: every row of a
    matrix wider than SPREAD now changes each step, by swaps that keep the values it holds."""
    g = torch.Generator().manual_seed(1)
    a = torch.randn(64, 96, generator=g)
    t = torch.randn(96, 40, generator=g).t()                  # a transposed view: memory order
    v = VariedInputs([a, t])
    for _ in range(5):
        before = [x.clone() for x in v.tensors]
        v.step()
        for x, b in zip(v.tensors, before):
            rows = (x != b).any(dim=1)
            assert bool(rows.all()), f"{int((~rows).sum())} row(s) unchanged"
            # every value but one (the halved one) is one the tensor held; that one is half of one
            new = x.flatten()[~torch.isin(x.flatten(), b.flatten())]
            assert len(new) <= 1 and bool(torch.isin(new * 2, b.flatten()).all())
    # copies take the same steps
    g = torch.Generator().manual_seed(1)
    a2 = torch.randn(64, 96, generator=g)
    t2 = torch.randn(96, 40, generator=g).t()
    w = VariedInputs([a2, t2])
    for _ in range(5):
        w.step()
    assert torch.equal(a, a2) and torch.equal(t, t2)


def test_the_timers_turns_give_an_incremental_memo_no_cheap_call(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(64, 128, generator=g), torch.randn(128, 32, generator=g)
    a0, b0 = a.clone(), b.clone()
    cheat = IncrementalMemo(a, b)
    fns = {"original": lambda: a0 @ b0, "cheat": cheat}
    vary = {"original": VariedInputs([a0, b0]).step, "cheat": VariedInputs([a, b]).step}
    timing._time_events_turns(fns, ["original", "cheat"], 30, lambda: None, vary=vary)
    assert cheat.cheap == 0
    assert torch.equal(a, a0) and torch.allclose(cheat(), a0 @ b0, atol=1e-4)
    # one element of each changed alone, as before: the cheat redoes a row and a column a turn
    one = IncrementalMemo(a, b)
    one()
    for i in range(10):
        a[i % 64, 3] *= 0.5
        b[5, i % 32] *= 0.5
        assert torch.allclose(one(), a @ b, atol=1e-4)
    assert one.cheap == 10
