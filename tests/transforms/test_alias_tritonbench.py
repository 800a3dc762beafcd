"""TritonBench-G's fast_rms_layernorm picks its forward kernel through a local alias
(``fx = gemma_kernel if gemma else plain_kernel``; ``fx[grid](...)``). Before alias launches were
resolved its only launch site was the backward kernel, which the benchmark never runs, and every
rule move went there. The record is read from ../shared at run time (nothing of it is committed);
the test skips when it is absent."""

import json
from pathlib import Path

import pytest
import torch
from tritonforge.analyze import analyze_source
from tritonforge.transforms import get

DATA = Path(__file__).resolve().parents[3] / "shared" / "tritonbench_g" / "kernels.json"
SEPARATOR = "#" * 146
NAME = "fast_rms_layernorm"


@pytest.fixture(scope="module")
def module_source():
    if not DATA.exists():
        pytest.skip(f"{DATA} not present")
    record = next((r for r in json.loads(DATA.read_text(encoding="utf-8"))
                   if r["name"] == NAME), None)
    if record is None:
        pytest.skip(f"no {NAME} record")
    return record["source"].split(SEPARATOR)[0]


def _sites(a):
    by_kernel = {}
    for s in a.launch_sites:
        by_kernel.setdefault(s.kernel, []).append(s)
    return by_kernel


def test_the_forward_kernels_are_launch_sites_through_the_alias(module_source):
    a = analyze_source(module_source)
    sites = _sites(a)
    forward = [n for n in sites if n.endswith("_forward")]
    assert len(forward) == 2 and len(a.launch_sites) == 3
    for name in forward:
        (s,) = sites[name]
        assert s.alias is not None and set(s.alias_kernels) == set(forward)
        assert s.function.endswith(".forward") and s.knobs.num_warps_given
    (back,) = [s for s in a.launch_sites if s.alias is None]
    assert back.function.endswith(".backward")


def test_warps_at_the_alias_call_reach_the_forward_kernel_only(module_source, load):
    a = analyze_source(module_source)
    (plain,) = [s for s in a.launch_sites if s.alias and "gemma" not in s.kernel]
    out = get("launch_params").apply(module_source, a, num_warps=8, site=plain.index)
    after = analyze_source(out)
    for s in after.launch_sites:
        assert (s.num_warps.source == "8") == (s.alias is not None)
    # the file runs on the CPU through the interpreter once its CUDA device strings are CPU
    cpu = [src.replace('"cuda:0"', '"cpu"').replace(".cuda()", "") for src in (module_source, out)]
    old, new = load(cpu[0]), load(cpu[1])
    torch.manual_seed(0)
    x = torch.randn(2, 4, 8)
    for gemma in (False, True):
        want = old.fast_rms_layernorm(old.SimpleLayerNorm(8), x, gemma=gemma)
        got = new.fast_rms_layernorm(new.SimpleLayerNorm(8), x, gemma=gemma)
        assert torch.equal(want, got)


def test_the_proposer_moves_the_profiled_forward_kernel_first(module_source):
    from tritonforge.search.rules import RuleProposer

    a = analyze_source(module_source)
    (plain,) = [s for s in a.launch_sites if s.alias and "gemma" not in s.kernel]
    moves = RuleProposer().moves(module_source, None, frozenset({plain.kernel}))
    at = [dict(m.params)["site"] for m in moves if "site" in dict(m.params)]
    first_other = next(i for i, site in enumerate(at) if site != plain.index)
    assert first_other >= 2 and set(at[:first_other]) == {plain.index}
    scores = {site: max(m.score for m in moves if dict(m.params).get("site") == site)
              for site in set(at)}
    assert all(scores[plain.index] > v for site, v in scores.items() if site != plain.index)
