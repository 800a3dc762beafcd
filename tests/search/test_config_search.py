"""The config search (search.config_space, search.config_search) on kernels that no rule knows:
its space comes from the launch analysis, configs over sm_90 are dropped before any compile (and
the sm_90 compiler agrees), its ranked candidates compute what the original does (interpreter),
and later rounds search around the configs that measured fastest."""

import ast
import dataclasses
import math
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).parent))

import cs_samples  # noqa: E402
from cs_samples import ENTRIES, SPECS, inputs  # noqa: E402

from tritonforge.analyze import analyze_source  # noqa: E402
from tritonforge.model import Candidate, HardwareInfo, HistoryEntry, ProposalContext, Status  # noqa: E402
from tritonforge.profile.limits import limits_for  # noqa: E402
from tritonforge.search.config_search import ConfigSearchProposer  # noqa: E402
from tritonforge.search.config_space import contiguous_blocks, rank_site, site_space  # noqa: E402
from tritonforge.search.prune import Fit, check_source  # noqa: E402
from tritonforge.tasks.loader import task_from_file  # noqa: E402

SM90 = limits_for(90)
H100 = HardwareInfo("NVIDIA H100", False, sm_count=132, capability="9.0")


def _task(tmp_path, name, source=None, spec=None):
    (tmp_path / f"{name}.py").write_text(source or getattr(cs_samples, name))
    (tmp_path / f"{name}.toml").write_text(spec or SPECS[name])
    return task_from_file(tmp_path / f"{name}.py", tmp_path / f"{name}.toml")


def _context(task, source, round_=1, budget=24, history=()):
    return ProposalContext(task, Candidate(source, "original"), round_, H100, budget=budget,
                           history=tuple(history))


def _space(source):
    analysis = analyze_source(source)
    return site_space(analysis, analysis.knobs[0], ast.parse(source))


def test_the_space_comes_from_the_launch_analysis():
    stencil = _space(cs_samples.STENCIL)
    assert dict(stencil.current_blocks) == {"TILE_H": 8, "TILE_W": 16}
    assert stencil.contiguous == frozenset({"TILE_W"})
    assert stencil.stages == (3,)          # no loop over loads: num_stages would change nothing
    assert 8 in stencil.warps and 1 in stencil.warps
    row = _space(cs_samples.ROWOP)
    assert dict(row.current_blocks) == {"CHUNK": 32} and row.current_stages == 2
    assert len(row.stages) == 5 and all(v & (v - 1) == 0 for _, vs in row.blocks for v in vs)
    gather = _space(cs_samples.GATHER)
    assert {n for n, _ in gather.blocks} == {"SPAN", "WIDTH"}    # SPAN is set through a local
    assert contiguous_blocks(ast.parse(cs_samples.GATHER), "gather_rows") == {"WIDTH"}


def _run(load, name, source):
    import torch

    args = inputs(name)
    return getattr(load(source), ENTRIES[name])(*[a.clone() for a in args])


@pytest.mark.parametrize("name", ["STENCIL", "ROWOP", "GATHER"])
def test_ranked_candidates_for_unfamiliar_kernels_verify_on_the_interpreter(tmp_path, load, name):
    import torch

    source = getattr(cs_samples, name)
    proposer = ConfigSearchProposer()
    cands = proposer.propose(_context(_task(tmp_path, name), source))
    assert len(cands) >= 20, [c.description for c in cands]
    assert len({c.hash for c in cands}) == len(cands)
    assert all(c.origin == "config-search" and c.description.startswith("config ") for c in cands)
    # several knobs move together: a joint search, not one knob at a time
    assert any(c.description.count("->") >= 2 for c in cands)
    expected = _run(load, name, source)
    for cand in cands[:4] + cands[-2:]:
        got = _run(load, name, cand.source)
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6, msg=cand.description)


def test_rows_along_the_contiguous_axis_are_ranked_wide(tmp_path):
    cands = ConfigSearchProposer().propose(_context(_task(tmp_path, "STENCIL"), cs_samples.STENCIL))
    for c in cands[:5]:
        assert "TILE_W 16 -> 8" not in c.description and "TILE_W 16 -> 4" not in c.description


MATMUL_SPEC = ('entry = "matmul"\nseeds = 1\n[[case]]\nid = "c"\n'
               'args = [{ tensor = [16, 16] }, { tensor = [16, 16] }]\n'
               '[[case]]\nid = "p"\nrole = "performance"\n'
               'args = [{ tensor = [4096, 4096] }, { tensor = [4096, 4096] }]\n')


def _matmul():
    from test_prune import MATMUL

    return MATMUL


def test_a_config_over_sm90_shared_memory_is_dropped_before_compiling():
    source = _matmul()
    space = dataclasses.replace(_space(source), warps=(4,), stages=(2, 4),
                                blocks=(("BLOCK_M", (64,)), ("BLOCK_N", (64,)), ("BLOCK_K", (128,))))
    ranked, dropped = rank_site(ast.parse(source), space, SM90, (4, 4))
    assert [r.config.num_stages for r in ranked] == [2]
    assert [d.config.num_stages for d in dropped] == [4] and dropped[0].resources == ("shared",)


@pytest.mark.slow
def test_the_sm90_compiler_agrees_with_the_drop(tmp_path):
    """64x64 tiles with a K tile of 128, fp32: 4 stages need ~256 KiB of shared memory (over
    sm_90's 227 KiB: Triton refuses to load it), 2 stages ~128 KiB. Compiled for sm_90 without a
    GPU; the dropped config is the one the compiler reports over the limit."""
    pytest.importorskip("triton.backends.nvidia")
    from tritonforge.profile.static import compile_stats

    path = tmp_path / "mm.py"
    path.write_text(_matmul())
    sig = {p: "*fp32" for p in ("a_ptr", "b_ptr", "c_ptr")}
    sig.update({p: "i32" for p in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk",
                                    "stride_bn", "stride_cm", "stride_cn")})
    blocks = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 128}
    over = compile_stats(str(path), "matmul_kernel", sig, blocks, num_warps=4, num_stages=4,
                         isolate=True)
    fits = compile_stats(str(path), "matmul_kernel", sig, blocks, num_warps=4, num_stages=2,
                         isolate=True)
    assert over.error is None and fits.error is None, (over.error, fits.error)
    assert over.shared_bytes > SM90.shared_per_block >= fits.shared_bytes


def test_no_proposed_matmul_config_is_over_the_device(tmp_path):
    source = _matmul()
    task = _task(tmp_path, "mm", source, MATMUL_SPEC)
    proposer = ConfigSearchProposer()
    cands = proposer.propose(_context(task, source, budget=32))
    assert len(cands) == 32
    assert proposer.dropped > 0          # the space holds configs over sm_90, none is proposed
    for c in cands:
        for check in check_source(c.source, SM90, (4, 4)):
            assert check.fit is not Fit.OVER, c.description
            assert not any(r == "shared" for r, _ in check.uncertain), c.description
        assert "num_warps 4 -> 2" not in c.description     # tl.dot keeps a warpgroup


def test_later_rounds_search_around_the_fastest_measured_config(tmp_path):
    source = cs_samples.ROWOP
    task = _task(tmp_path, "ROWOP")
    proposer = ConfigSearchProposer()
    first = proposer.propose(_context(task, source, budget=12))
    winner = first[-1]
    best = proposer.config_of(winner.hash)
    history = [HistoryEntry(c.hash, c.origin, c.description, Status.OK,
                            1.3 if c is winner else 0.9) for c in first]
    second = proposer.propose(_context(task, source, round_=2, budget=12, history=history))
    assert second
    assert not {c.hash for c in second} & {c.hash for c in first}
    keys = {proposer.config_of(c.hash).key for c in first}
    assert not any(proposer.config_of(c.hash).key in keys for c in second)
    near = [proposer.config_of(c.hash).distance(best) for c in second[:3]]
    assert max(near) <= 1.5, (best, [c.description for c in second[:3]])


def test_the_proposal_context_has_the_config_search_only_flag(tmp_path):
    ctx = _context(_task(tmp_path, "ROWOP"), cs_samples.ROWOP)
    assert ctx.config_search_only is False
    only = dataclasses.replace(ctx, config_search_only=True)
    assert ConfigSearchProposer().propose(only)     # the one round a near-roofline stop runs
    from tritonforge.search.rules import RuleProposer

    assert RuleProposer().propose(ctx) and RuleProposer().propose(only) == []   # no host-side move
    # the config-only round leaves room for the rules' host-side moves, and tops up what they
    # leave unused
    from tritonforge.search.config_search import CONFIG_ONLY_SHARE

    proposer = ConfigSearchProposer()
    first = proposer.propose(dataclasses.replace(only, budget=16))
    assert len(first) == math.ceil(16 * CONFIG_ONLY_SHARE) < 16
    more = proposer.top_up(dataclasses.replace(only, budget=16 - len(first)))
    assert more and not {c.hash for c in more} & {c.hash for c in first}


@pytest.mark.slow
def test_the_loop_runs_the_config_search_end_to_end_on_the_interpreter(tmp_path):
    """One round through the real loop (worker process, verification against the original,
    the interpreter's correctness-only acceptance) with the config search alone."""
    from tritonforge.config import Settings
    from tritonforge.runtime.evaluator import Evaluator
    from tritonforge.search.loop import Optimizer
    from tritonforge.store import RunStore

    task = _task(tmp_path, "ROWOP", spec=SPECS["ROWOP"].split("[[case]]\nid = \"p\"")[0])
    settings = Settings(device="cpu", max_rounds=1, patience=1, case_timeout_s=120, seeds=1)
    with RunStore(tmp_path / "store.sqlite") as store:
        ev = Evaluator(settings, tmp_path / "w0", store, device="cpu")
        try:
            result = Optimizer(task, settings, [ev], [ConfigSearchProposer()], store,
                               candidates_per_round=3).run()
        finally:
            ev.close()
    assert result.best.hash != result.original.hash
    assert result.final is not None and result.final.accepted
    assert result.best.origin == "config-search" and "CHUNK=32" not in result.best.source


def test_a_num_warps_the_wrapper_computes_is_searched_too(tmp_path, load):
    import torch

    src = cs_samples.ROWOP.replace("num_warps=2, num_stages=2", "num_warps=nw, num_stages=2") \
        .replace("    rows, cols = x.shape\n", "    rows, cols = x.shape\n    nw = 4 if cols > 64 else 2\n")
    assert "num_warps=nw" in src and "nw = 4" in src
    cands = ConfigSearchProposer().propose(_context(_task(tmp_path, "ROWOP", src), src))
    computed = [c for c in cands if "num_warps (computed) ->" in c.description]
    assert computed and len(cands) >= 20
    cand = computed[0]
    assert "num_warps=nw" not in cand.source
    expected = _run(load, "ROWOP", src)
    torch.testing.assert_close(_run(load, "ROWOP", cand.source), expected)
    # beside the literals, the wrapper's own rule scaled: it still follows the sizes
    scaled = {c.description: c for c in cands if "num_warps (computed) x" in c.description
              or "num_warps (computed) /" in c.description}
    assert set(scaled) == {f"config num_warps (computed) {f} at launch 0 (scaled_relu_rowmax)"
                           for f in ("x2", "/2", "x4", "/4")}
    double = scaled["config num_warps (computed) x2 at launch 0 (scaled_relu_rowmax)"]
    assert "num_warps=min(32, nw * 2)" in double.source and "nw = 4 if cols > 64" in double.source
    torch.testing.assert_close(_run(load, "ROWOP", double.source), expected)


def test_an_autotuned_kernel_gets_ranked_configs_added_to_its_list(tmp_path, load, fake_bench):
    """Each candidate is the kernel's @triton.autotune list plus one ranked config; under the
    interpreter the last config tried wins (``fake_bench``), so the added one is what runs."""
    import torch

    sys.path.insert(0, str(Path(__file__).parents[1] / "transforms"))
    import tf_samples

    src = tf_samples.AUTOTUNED
    spec = ('entry = "double"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [1000] }]\n'
            '[[case]]\nid = "p"\nrole = "performance"\nargs = [{ tensor = [16777216] }]\n')
    cands = ConfigSearchProposer().propose(_context(_task(tmp_path, "dbl", src, spec), src))
    assert len(cands) >= 10
    assert all("added to @triton.autotune" in c.description for c in cands)
    top = cands[0]
    assert top.source.count("triton.Config(") == 3
    assert "'BLOCK': 32" in top.source and "'BLOCK': 64" in top.source    # the list is kept
    x = torch.randn(1000, generator=torch.Generator().manual_seed(0))
    before = len(fake_bench)
    torch.testing.assert_close(load(top.source).double(x.clone()), 2 * x)
    assert len(fake_bench) - before == 3          # the new config was measured beside the two


def test_a_launch_with_a_star_args_splat_is_searched(tmp_path, load):
    """``*args`` binds positional parameters only: num_warps and num_stages, keyword-only launch
    options, are searched there, and the keyword tile too; the candidates compute the same."""
    import torch

    src = cs_samples.ROWOP.replace("x, y, m, cols, x.stride(0), scale, bias, CHUNK=32,\n"
                                   "                                num_warps=2, num_stages=2)",
                                   "x, y, m, cols, *x.stride()[:1], scale, bias, CHUNK=32)")
    assert "*x.stride()[:1]" in src and "num_warps" not in src
    space = _space(src)
    assert space is not None and set(space.warps) == {1, 2, 4, 8, 16}
    assert dict(space.blocks)["CHUNK"] and space.pipelined and len(space.stages) > 1
    cands = ConfigSearchProposer().propose(_context(_task(tmp_path, "ROWOP", src), src))
    warps = [c for c in cands if "num_warps 4 ->" in c.description]
    assert warps and len(cands) >= 20
    assert "*x.stride()[:1], scale, bias" in warps[0].source and "num_warps=" in warps[0].source
    expected = _run(load, "ROWOP", src)
    for cand in warps[:2]:
        torch.testing.assert_close(_run(load, "ROWOP", cand.source), expected)


def test_beside_a_kwargs_splat_only_the_options_written_at_the_call_vary(tmp_path, load):
    """A ``**kwargs`` splat may carry num_warps/num_stages: an option not written at the call is
    left alone (adding it could collide with the splat's), one written there is searched."""
    import torch

    hidden = cs_samples.ROWOP.replace("CHUNK=32,\n                                num_warps=2, "
                                      "num_stages=2)", "**opts)") \
        .replace("    rows, cols = x.shape\n",
                 "    rows, cols = x.shape\n    opts = dict(CHUNK=32, num_warps=2)\n")
    assert "**opts)" in hidden
    assert _space(hidden) is None
    written = hidden.replace("**opts)", "num_warps=nw, **opts)") \
        .replace("opts = dict(CHUNK=32, num_warps=2)", "opts = dict(CHUNK=32)\n    nw = 2")
    space = _space(written)
    assert space is not None and set(space.warps) == {1, 2, 4, 8, 16} and len(space.stages) == 1
    cands = ConfigSearchProposer().propose(_context(_task(tmp_path, "ROWOP", written), written))
    assert cands and all("num_stages" not in c.description for c in cands)
    assert all("**opts)" in c.source and "num_warps=nw" not in c.source for c in cands)
    expected = _run(load, "ROWOP", written)
    torch.testing.assert_close(_run(load, "ROWOP", cands[0].source), expected)


def test_a_kernel_sized_by_its_heuristics_gets_scaled_configs(tmp_path, load):
    """Nothing at the launch can change what ``@triton.heuristics`` sets: the search scales the
    user's rule in the decorator instead (``search.scaled_configs``), every config once, and
    the candidates compute the same."""
    import torch

    src = cs_samples.HEURISTIC
    analysis = analyze_source(src)
    assert site_space(analysis, analysis.knobs[0], ast.parse(src)) is None   # the launch has none
    task = _task(tmp_path, "HEURISTIC")
    proposer = ConfigSearchProposer()
    first = proposer.propose(_context(task, src, budget=6))
    assert [c.description for c in first[:2]] == ["config heuristics num_warps x2 (scale_shift)",
                                                  "config heuristics BLOCK x2 (scale_shift)"]
    assert all(c.description.startswith("config heuristics ") for c in first) and len(first) == 6
    expected = _run(load, "HEURISTIC", src)
    for cand in first:
        torch.testing.assert_close(_run(load, "HEURISTIC", cand.source), expected,
                                   msg=cand.description)
    history = [HistoryEntry(c.hash, c.origin, c.description, Status.OK, 1.0) for c in first]
    later = proposer.propose(_context(task, src, round_=2, budget=100, history=history))
    assert later and not {c.description for c in later} & {c.description for c in first}
    # BLOCK 5 choices x num_warps 3, the heuristics as written excluded
    assert len(first) + len(later) == 14


def test_kernels_the_profile_never_saw_launched_wait_until_those_it_saw_are_spent(tmp_path):
    """A backward kernel the forward entry never launches gets no config while the launched one
    still has some (served in the same turns, it took half of a round)."""
    from tritonforge.model import KernelProfile, Profile

    src = cs_samples.HEURISTIC
    backward = src.split("@triton.heuristics")[1].split("\ndef affine")[0]
    src += ("\n\n@triton.heuristics" + backward.replace("def scale_shift", "def scale_shift_bwd")
            + "\n\ndef affine_bwd(x, scale=0.5):\n    y = torch.empty_like(x)\n"
            "    n = x.numel()\n    scale_shift_bwd[lambda meta: (triton.cdiv(n, meta[\"BLOCK\"]),)]"
            "(x, y, n, scale)\n    return y\n")
    task = _task(tmp_path, "HEURISTIC", source=src)
    profile = Profile("HEURISTIC", "p", "ncu", kernels=(KernelProfile("scale_shift", ()),))

    def kernels(cands):
        return {c.description.rsplit("(", 1)[1].rstrip(")") for c in cands}
    seen = ConfigSearchProposer().propose(dataclasses.replace(_context(task, src, budget=6),
                                                              profile=profile))
    assert len(seen) == 6 and kernels(seen) == {"scale_shift"}
    # without a profile both are served in turn
    both = ConfigSearchProposer().propose(_context(task, src, budget=6))
    assert kernels(both) == {"scale_shift", "scale_shift_bwd"}
    # once the launched kernel's configs are spent, the other's take at most COLD_SHARE of the
    # call's budget (3 of 20), not the rest of the round
    rest = ConfigSearchProposer().propose(dataclasses.replace(_context(task, src, budget=20),
                                                              profile=profile))
    assert [c.description.endswith("(scale_shift_bwd)") for c in rest].index(True) == 14
    assert len(rest) == 14 + 3 and kernels(rest[14:]) == {"scale_shift_bwd"}


def test_a_branch_round_proposes_configs_already_proposed_from_the_incumbent(tmp_path):
    """A config proposed from the incumbent is not proposed again from it; from a near miss (a
    branch round, search.branch) it is: on other code the same launch options make a new file."""
    source = cs_samples.ROWOP
    task = _task(tmp_path, "ROWOP")
    proposer = ConfigSearchProposer()
    first = proposer.propose(_context(task, source, budget=4))
    keys = {proposer.config_of(c.hash).key for c in first}
    again = proposer.propose(_context(task, source, round_=2, budget=4))
    assert not {proposer.config_of(c.hash).key for c in again} & keys
    near = Candidate(source.replace("def ", "# a near miss\ndef ", 1), "rules")
    ctx = dataclasses.replace(_context(task, source, round_=3, budget=4), incumbent=near,
                              branch=True)
    branched = proposer.propose(ctx)
    assert {proposer.config_of(c.hash).key for c in branched} & keys
    assert all(c.parent == near.hash and "# a near miss" in c.source for c in branched)
