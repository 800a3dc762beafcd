"""The meta-device child that reads TritonBench-G performance scripts without allocating: the
shared prelude serves both the input count (tasks) and the byte sizes (scripts/testgen_compare)."""

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from tritonforge.tasks.tritonbench import count_perf_inputs, default_data_dir, load_records

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def records():
    data = default_data_dir()
    if data is None:
        pytest.skip("TritonBench-G data not found (TRITONFORGE_TRITONBENCH)")
    return load_records(data)


def test_input_counts_and_bytes_come_from_one_prelude(records):
    spec = importlib.util.spec_from_file_location("testgen_compare", ROOT / "scripts/testgen_compare.py")
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    rec = records["add_example"]
    counts = count_perf_inputs([rec])
    sizes = compare.perf_script_bytes(rec)
    assert counts["add_example"] == len(sizes) > 1
    assert sizes == sorted(sizes) and sizes[0] > 0            # its inputs grow, all counted


def test_a_script_that_fails_counts_as_unknown(records):
    broken = replace(records["add_example"], name="broken", perf_source="raise ValueError")
    assert count_perf_inputs([broken]) == {"broken": None}
