"""Launch shapes whose compile ran out of shared memory, learned within a record
(search.overflows): what a failure teaches, what it prunes, and what it must leave alone."""

from types import SimpleNamespace

from tritonforge.config import Settings
from tritonforge.model import Candidate, Failure, HardwareInfo, Status, VariantResult
from tritonforge.search.overflows import learn_overflow, learned_overflow, shared_overflow
from tritonforge.search.stages import RoundStages

# the tile is computed by the wrapper: the static estimate cannot size it
BASE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _fwd_kernel(Q, Out, n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    for start in range(0, n, BLOCK_N):
        q = tl.load(Q + offs, mask=offs < n)
        tl.store(Out + offs, q, mask=offs < n)


@triton.jit
def _other_kernel(X, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(X + offs, 0.0, mask=offs < n)


def context_fwd(q, out):
    BLOCK = 128 if q.shape[-1] <= 64 else 64
    num_warps = 4 if q.shape[-1] <= 64 else 8
    grid = (triton.cdiv(q.numel(), BLOCK),)
    _fwd_kernel[grid](q, out, q.numel(), BLOCK_M=BLOCK, BLOCK_N=BLOCK, num_warps=num_warps,
                      num_stages=1)
    _other_kernel[grid](out, q.numel(), BLOCK=256, num_stages=2)
    return out
'''
OUT_OF_SHARED = ("out of resources: out of resource: shared memory, Required: 328704, Hardware "
                 "limit: 232448. Reducing block sizes or `num_stages` may help.")


def stages(n: int, warps: str = "num_warps") -> str:
    return BASE.replace("num_warps=num_warps,\n                      num_stages=1)",
                        f"num_warps={warps},\n                      num_stages={n})")


def test_only_a_clear_shared_memory_overflow_teaches():
    assert shared_overflow(OUT_OF_SHARED) == (328704, 232448)
    assert shared_overflow(OUT_OF_SHARED.replace("328704", "235000")) is None   # within 10%
    assert shared_overflow("out of resource: registers, Required: 400, Hardware limit: 255") is None
    assert learn_overflow(stages(3), BASE, "CompilationError: at 12:4: bad") is None


def test_a_failed_stage_count_prunes_as_many_stages_or_more_with_the_same_tiles():
    learned = learn_overflow(stages(3), BASE, OUT_OF_SHARED)
    assert learned is not None and (learned.kernel, learned.site, learned.stages) == ("_fwd_kernel", 0, 3)
    assert "num_stages=4" in learned_overflow(stages(4), BASE, [learned])
    assert learned_overflow(stages(3, warps="8"), BASE, [learned])        # num_warps aside
    assert learned_overflow(stages(2), BASE, [learned]) is None           # fewer stages
    smaller = stages(4).replace("128 if", "32 if")                         # other tiles
    assert learned_overflow(smaller, BASE, [learned]) is None
    other = stages(4).replace("tl.store(Out + offs, q,", "tl.store(Out + offs, q * 2,")
    assert learned_overflow(other, BASE, [learned]) is None               # another kernel body
    # the other launch's stages are another launch's
    assert learned_overflow(BASE.replace("num_stages=2)", "num_stages=5)"), BASE, [learned]) is None


def test_nothing_is_learned_where_two_launches_changed_or_the_base_already_compiled_it():
    both = stages(3).replace("num_stages=2)", "num_stages=4)")
    assert learn_overflow(both, BASE, OUT_OF_SHARED) is None               # which one overflowed?
    learned = learn_overflow(stages(3), BASE, OUT_OF_SHARED)
    # a base with that shape at 4 stages compiled: its own config is never pruned on it
    assert learned_overflow(stages(4), stages(4), [learned]) is None
    # a failure at the stages the base compiled with is its num_warps': it teaches nothing
    assert learn_overflow(stages(3, warps="16"), stages(3), OUT_OF_SHARED) is None


def test_a_change_outside_the_launch_options_is_another_shape():
    """A module-level tile constant changed with the stages: the overflow may be the tile's, so
    nothing is learned; and what the stages alone taught prunes no candidate with another tile."""
    base = "TILE = 128\n" + BASE.replace("BLOCK_N=BLOCK,", "BLOCK_N=TILE,")

    def at(src: str, n: int) -> str:
        return src.replace("num_warps=num_warps,\n                      num_stages=1)",
                           f"num_warps=num_warps,\n                      num_stages={n})")

    assert learn_overflow(at(base.replace("TILE = 128", "TILE = 1024"), 4), base,
                          OUT_OF_SHARED) is None
    learned = learn_overflow(at(base, 3), base, OUT_OF_SHARED)
    assert learned is not None and learned_overflow(at(base, 4), base, [learned])
    assert learned_overflow(at(base.replace("TILE = 128", "TILE = 32"), 4), base,
                            [learned]) is None


def test_a_round_learns_from_its_compile_errors_and_prunes_the_next_rounds_alike():
    notes, history, said = [], [], []
    st = RoundStages(SimpleNamespace(name="t"), Settings(device="cpu"), [object()], [], None,
                     said.append, 16, True)
    base, hw = Candidate(BASE, "original"), HardwareInfo("fake", False)
    s3, s4, s2 = (Candidate(stages(n), "config-search", base.hash, f"num_stages 1 -> {n}")
                  for n in (3, 4, 2))
    assert st._prune(st.task, base, [s3], hw, history, notes) == [s3]
    st._learn_overflows([s3], {s3.hash: VariantResult("candidate", s3.hash, Status.COMPILE_ERROR,
                                                      Failure(Status.COMPILE_ERROR, OUT_OF_SHARED))})
    assert len(said) == 1 and "num_stages=3" in said[0]
    assert st._prune(st.task, base, [s4, s2], hw, history, notes) == [s2]
    assert [h.status for h in history] == [Status.PRUNED] and history[0].candidate == s4.hash
    assert "out of shared memory at num_stages=3" in history[0].reason
