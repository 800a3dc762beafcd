"""--emit autotune: the best configs become an @triton.autotune on the original, which must still
verify (here through the worker on the interpreter, whose autotuner runs every config)."""

from pathlib import Path

from tritonforge.config import Settings
from tritonforge.model import Candidate, Status, Variant
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.search.emit import autotune_candidate
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
SPEC = 'entry = "sin_triton"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [300] }]\n'


def _cands(src):
    a = Candidate(src.replace("BLOCK_SIZE = 4", "BLOCK_SIZE = 1024"), "rules")
    b = Candidate(src.replace("BLOCK_SIZE = 4", "BLOCK_SIZE = 256").replace(
        "BLOCK_SIZE=BLOCK_SIZE)", "BLOCK_SIZE=BLOCK_SIZE, num_warps=8)"), "rules")
    return a, b


def test_best_configs_become_an_autotune_decorator():
    src = EXAMPLE.read_text()
    auto = autotune_candidate(Candidate(src, "original"), list(_cands(src)))
    assert auto is not None and "@triton.autotune(" in auto.source
    assert "triton.Config({'BLOCK_SIZE': 1024}, num_warps=4" in auto.source
    assert "triton.Config({'BLOCK_SIZE': 256}, num_warps=8" in auto.source
    assert "META['BLOCK_SIZE']" in auto.source


def test_one_config_gives_no_autotune():
    src = EXAMPLE.read_text()
    assert autotune_candidate(Candidate(src, "original"), [Candidate(src, "original")]) is None


def test_autotuned_output_verifies(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    task = task_from_file(EXAMPLE, spec)
    auto = autotune_candidate(Candidate(task.source, "original"), list(_cands(task.source)))
    with Evaluator(Settings(device="cpu"), tmp_path / "w", device="cpu") as ev:
        result = ev.evaluate(task, (original_variant(task), Variant("auto", auto.source, auto.hash)),
                             purpose="t", verify=True, time=False).result("auto")
    assert result.status is Status.OK, result


def test_auto_emit_turns_a_one_size_veto_into_an_autotune_with_the_original_config():
    """emit=auto: a best fixed config faster overall but vetoed by one slower size becomes an
    autotune over it and the ORIGINAL config (each size then takes its faster one)."""
    from tritonforge.model import Decision
    from tritonforge.search.arbiter import ArbiterPolicy
    from tritonforge.search.final_check import FinalCheck

    opt = FinalCheck.__new__(FinalCheck)
    opt.settings, opt.policy = Settings(), ArbiterPolicy()
    assert Settings().emit == "auto"
    vetoed = Decision("h", False, 1.25, 1.24, 1.1, 1.72, "case perf-00 is 72.3% slower")
    noise = Decision("h", False, 1.01, 0.99, 1.0, 1.02, "within noise")
    assert opt._vetoed_by_one_size(vetoed) and not opt._vetoed_by_one_size(noise)
    assert not opt._vetoed_by_one_size(None)
    src = EXAMPLE.read_text()
    best, _ = _cands(src)
    auto = autotune_candidate(Candidate(src, "original"), [best, Candidate(src, "original")])
    assert auto is not None
    assert "triton.Config({'BLOCK_SIZE': 1024}" in auto.source
    assert "triton.Config({'BLOCK_SIZE': 4}" in auto.source        # the original's config


def test_size_split_configs_become_an_autotune_with_the_chain_best_and_the_original():
    """A search decision faster overall but vetoed by one size is kept aside; at the end the best
    such configs, the accepted chain's best and the original's config become one autotune, which
    the final check judges like any output (fp4_to_bf16, H100: 1.16x overall, one size 28% slower)."""
    from tritonforge.model import Decision
    from tritonforge.search.arbiter import ArbiterPolicy
    from tritonforge.search.final_check import FinalCheck

    opt = FinalCheck.__new__(FinalCheck)
    opt.settings, opt.policy, opt.interpreted, opt.store = Settings(), ArbiterPolicy(), False, None
    split_only = Decision("h", False, 1.16, 1.15, 1.05, 1.28, "case perf-01 is 28% slower")
    noise_and_slow = Decision("h", False, 1.02, 1.005, 1.0, 1.3, "case perf-01 is 30% slower")
    accepted = Decision("h", True, 1.2, 1.19, 1.1, 1.0, "1.2x")
    assert opt._split_worthy(split_only)
    assert not opt._split_worthy(noise_and_slow) and not opt._split_worthy(accepted)

    src = EXAMPLE.read_text()
    original = Candidate(src, "original")
    big, mid = _cands(src)
    judged = []

    def final(task, orig, cand):
        judged.append(cand)
        return Decision(cand.hash, verdict, 1.3, 1.29, 1.2, 1.0, "checked")

    opt._final = final
    verdict = True
    notes = []
    decision, best = opt._emit_size_split(None, original, [(1.16, 0, big)], [mid], notes)
    assert best is judged[0] and decision.accepted and best.origin == "emit:autotune"
    for block in ("1024", "256", "4"):               # split config, chain best, original
        assert f"triton.Config({{'BLOCK_SIZE': {block}}}" in best.source
    verdict = False                                  # not holding up: the chain is checked next
    assert opt._emit_size_split(None, original, [(1.16, 0, big)], [mid], []) == (None, original)


def test_a_timed_evaluation_notes_what_each_autotuner_picked(tmp_path):
    """The timing worker writes each autotuned kernel's pick per key into the evaluation's notes
    (runtime.autotune_picks): on the interpreter too, where every config runs and one wins."""
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC + '[[case]]\nid = "p"\nrole = "performance"\nargs = [{ tensor = [700] }]\n')
    task = task_from_file(EXAMPLE, spec)
    auto = autotune_candidate(Candidate(task.source, "original"), list(_cands(task.source)))
    with Evaluator(Settings(device="cpu"), tmp_path / "w", device="cpu") as ev:
        evaluation = ev.evaluate(task, (original_variant(task), Variant("auto", auto.source, auto.hash)),
                                 purpose="t", verify=False, time=True)
    picks = [n for n in evaluation.notes if n.startswith("autotune pick auto: ")]
    assert picks and all("BLOCK_SIZE=" in n and "num_warps=" in n for n in picks), evaluation.notes
    assert not any(n.startswith("autotune pick original") for n in evaluation.notes)   # not tuned
    # where the timed request's seconds went (the interpreter autotunes with its own shim)
    phases = [n for n in evaluation.notes if n.startswith("worker seconds (autotune full): ")]
    assert len(phases) == 1 and all(p in phases[0] for p in ("import ", "first runs", "timing "))


AUTOTUNED_SCALE = '''import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=4),
                          triton.Config({"BLOCK": 128}, num_warps=2)], key=["n"])
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 3 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def scale(x):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda META: (triton.cdiv(n, META["BLOCK"]),)](x, out, n)
    return out
'''


def test_a_pinned_autotune_verifies_and_a_wrong_pin_does_not(tmp_path):
    """autotune_pin's output passes the verifier against the autotuned original; the same file
    with the grid no longer following the pinned block (a pin that skips elements) is caught."""
    from tritonforge.transforms import ConfigSpec, get

    kernel = tmp_path / "scale.py"
    kernel.write_text(AUTOTUNED_SCALE)
    spec = tmp_path / "scale.toml"
    spec.write_text('entry = "scale"\nseeds = 2\n[[case]]\nid = "c"\nargs = [{ tensor = [1000] }]\n')
    task = task_from_file(kernel, spec)
    pinned = get("autotune_pin").apply(task.source, kernel="scale_kernel",
                                       config=ConfigSpec((("BLOCK", 64),), 4, 3))
    broken = pinned.replace('META["BLOCK"]', "256")
    with Evaluator(Settings(device="cpu"), tmp_path / "w", device="cpu") as ev:
        evaluation = ev.evaluate(task, (original_variant(task), Variant("pin", pinned, "p1"),
                                        Variant("broken", broken, "p2")),
                                 purpose="t", verify=True, time=False)
    assert evaluation.result("pin").status is Status.OK, evaluation.result("pin")
    assert evaluation.result("broken").status is not Status.OK


ROW_SQNORM = '''import torch
import triton
import triton.language as tl


@triton.jit
def row_sqnorm_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x * x, axis=0))


def row_sqnorm(x):
    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    n_cols = x.shape[1]
    row_sqnorm_kernel[(x.shape[0],)](x, out, n_cols, x.stride(0),
                                     BLOCK_N=triton.next_power_of_2(n_cols))
    return out
'''


def test_rows_per_program_verifies_and_a_missing_row_mask_does_not(tmp_path):
    """rows_per_program's output passes the verifier (odd row counts: the last program has rows
    past the end); without the row validity on the store, the rows past the end are written
    out of bounds or the poisoned output shows the difference."""
    from tritonforge.transforms import get

    kernel = tmp_path / "rows.py"
    kernel.write_text(ROW_SQNORM)
    spec = tmp_path / "rows.toml"
    spec.write_text('entry = "row_sqnorm"\nseeds = 2\n[[case]]\nid = "a"\n'
                    'args = [{ tensor = [37, 100] }]\n[[case]]\nid = "b"\nargs = [{ tensor = [5, 300] }]\n')
    task = task_from_file(kernel, spec)
    lifted = get("rows_per_program").apply(task.source, elements=1024)
    careless = lifted.replace("mask=_tf_row_ok)", ")").replace("_tf_rows=x.shape[0]",
                                                               "_tf_rows=x.shape[0] - 1")
    with Evaluator(Settings(device="cpu"), tmp_path / "w", device="cpu") as ev:
        good = ev.evaluate(task, (original_variant(task), Variant("rows", lifted, "r1")),
                           purpose="t", verify=True, time=False)
        # out-of-bounds stores may take the interpreter's process down: a worker of its own
        bad = ev.evaluate(task, (original_variant(task), Variant("careless", careless, "r2")),
                          purpose="t2", verify=True, time=False)
    assert good.result("rows").status is Status.OK, good.result("rows")
    assert bad.result("careless").status is not Status.OK


def _output_stub(verdicts):
    """A FinalCheck whose checks answer from ``verdicts`` (candidate -> (accepted, speedup)) and
    record their order; dispatch and size-split autotunes find nothing."""
    from tritonforge.model import Decision
    from tritonforge.search.arbiter import ArbiterPolicy
    from tritonforge.search.final_check import FinalCheck

    opt = FinalCheck.__new__(FinalCheck)
    opt.settings, opt.policy, opt.interpreted, opt.store = Settings(), ArbiterPolicy(), False, None
    judged = []

    def final(task, orig, cand):
        judged.append(cand)
        ok, speedup = verdicts[cand.hash]
        return Decision(cand.hash, ok, speedup, speedup, speedup, 1.0 if ok else 1.6,
                        "checked" if ok else "case perf-01 is 60% slower")
    opt._final = final
    opt._dispatched = lambda *a, **k: None
    opt._emit_size_split = lambda task, original, split, chain, notes: (None, original)
    return opt, judged


def test_the_chain_is_checked_before_a_split_config_where_it_alone_is_a_success():
    """A split config (faster overall, slower on a size) checked first could spend the time the
    chain's own check needs (softmax_flaggems, layer_norm_liger: H100 smoke of engine
    a98c89303aa9): where the chain is a success on its own it goes first, and the split after it
    replaces it only by beating it."""
    src = EXAMPLE.read_text()
    original = Candidate(src, "original")
    chain_best, top = _cands(src)
    split = [(1.5, 0, top)]
    opt, judged = _output_stub({chain_best.hash: (True, 1.2), top.hash: (False, 1.5)})
    decision, best = opt._output_chain(None, original, [chain_best], [], split, 1.2, [])
    assert judged == [chain_best, top] and best is chain_best and decision.speedup == 1.2
    opt, judged = _output_stub({chain_best.hash: (True, 1.2), top.hash: (True, 1.45)})
    decision, best = opt._output_chain(None, original, [chain_best], [], split, 1.2, [])
    assert judged == [chain_best, top] and best is top and decision.speedup == 1.45
    # the chain alone no success (1.03x): the split is checked first, as before
    opt, judged = _output_stub({chain_best.hash: (True, 1.03), top.hash: (True, 1.16)})
    decision, best = opt._output_chain(None, original, [chain_best], [], split, 1.03, [])
    assert judged == [top] and best is top
    # the chain's check fails: the split is still tried after it
    opt, judged = _output_stub({chain_best.hash: (False, 1.2), top.hash: (True, 1.4)})
    decision, best = opt._output_chain(None, original, [chain_best], [], split, 1.2, [])
    assert judged == [chain_best, top] and best is top
