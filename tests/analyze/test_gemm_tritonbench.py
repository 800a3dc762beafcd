"""GEMM tiles of TritonBench-G's autotuned batched GEMM (read from ../shared at run time).

Nothing of the record is committed: the test skips when the data set is absent.
"""

import json
from pathlib import Path

import pytest

from tritonforge.analyze import analyze_source
from tritonforge.search.gemm import gemm_move, gemm_tiles
from tritonforge.transforms.configs import extend_block_range
from tritonforge.transforms.autotune_widen import existing_specs

DATA = Path(__file__).resolve().parents[3] / "shared" / "tritonbench_g" / "kernels.json"
SEPARATOR = "#" * 146

pytestmark = pytest.mark.skipif(not DATA.exists(), reason=f"{DATA} not present")


def _record(name):
    records = json.loads(DATA.read_text(encoding="utf-8"))
    found = [r for r in records if r["name"] == name]
    if not found:
        pytest.skip(f"no record {name}")
    return found[0]["source"].split(SEPARATOR)[0]


def test_bmm_optimized_tiles_moves_and_floor():
    source = _record("bmm_optimized")
    analysis = analyze_source(source)
    dot_kernels = [k for k in analysis.kernels if k.uses_dot and k.autotune is not None]
    assert len(dot_kernels) == 1
    k = dot_kernels[0]
    tiles = gemm_tiles(source, k, k.autotune.tuned_names)
    assert tiles.found, tiles.reason
    specs = existing_specs(k)
    # M and N are the accumulator's rows and columns, K the tile every config holds at 32
    assert {s.value(tiles.k) for s in specs} == {32}
    assert {s.value(tiles.m) for s in specs} == {32, 64, 128}
    move = gemm_move(source, analysis, k.name)
    assert not isinstance(move, str), move
    assert len(move.configs) == 8 and all(c.value(tiles.k) >= 64 for c in move.configs)
    # the range extension keeps every tile of this tl.dot kernel at 16 or more
    extended = extend_block_range(k, specs, limit=64)
    assert extended and all(v >= 16 for c in extended for n, v in c.kwargs if n in
                            (tiles.m, tiles.n, tiles.k))
