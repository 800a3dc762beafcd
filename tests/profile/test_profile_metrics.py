"""The short-name table and the pure-Python reader of ncu's raw CSV page."""

import pytest

from tritonforge.profile.metrics import (
    BY_NCU,
    BY_SHORT,
    METRICS,
    STALL_NAMES,
    convert,
    ncu_metric_names,
    parse_number,
    parse_raw_csv,
    stall_shares,
)


def test_table_has_unique_short_and_ncu_names():
    assert len(BY_SHORT) == len(METRICS) and len(BY_NCU) == len(METRICS)
    for name in ("duration_us", "sm_throughput_pct", "mem_throughput_pct", "dram_bw_gbs",
                 "l1_hit_rate_pct", "l2_hit_rate_pct", "achieved_occupancy_pct",
                 "occ_limit_registers", "registers_per_thread", "tensor_pipe_pct",
                 "inst_executed", "stall_long_scoreboard"):
        assert name in BY_SHORT
    assert "smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio" not in ncu_metric_names(arch=80)
    assert "smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio" in ncu_metric_names(arch=90)


@pytest.mark.parametrize("value, unit, to, expected", [
    (10_080_608, "ns", "us", 10_080.608), (12.5, "usecond", "us", 12.5), (2.0, "msecond", "us", 2000.0),
    (3.0, "Kbyte", "B", 3000.0), (1.5, "Gbyte", "B", 1.5e9), (4.2e12, "byte/second", "GB/s", 4200.0),
    (2.5, "Tbyte/second", "GB/s", 2500.0), (3.0, "Gbyte/s", "GB/s", 3.0), (55.0, "%", "%", 55.0),
])
def test_convert_units(value, unit, to, expected):
    assert convert(value, unit, to) == pytest.approx(expected)


def test_parse_number_handles_thousands_separators_and_text():
    assert parse_number("1,980,000") == 1_980_000
    assert parse_number("339,574.50") == pytest.approx(339_574.5)
    assert parse_number("n/a") is None and parse_number("") is None and parse_number("(128, 1, 1)") is None


def test_parse_sin_fixture(fixtures_dir):
    text = (fixtures_dir / "h200_sin_basic_raw.csv").read_text()
    assert text.startswith("==WARNING==")       # ncu's and the program's lines precede the table
    kernels = parse_raw_csv(text)
    assert [k.kernel for k in kernels] == ["sin_kernel", "sin_kernel"]
    assert [k.launch_id for k in kernels] == [0, 1]
    k = kernels[0]
    assert k.duration_us == pytest.approx(10_080.608)
    assert k.get("grid_size") == 16_777_216 and k.get("block_size") == 128
    assert k.get("dram_throughput_pct") == pytest.approx(1.08)
    assert k.get("sm_throughput_pct") == pytest.approx(32.25)
    assert k.get("achieved_occupancy_pct") == pytest.approx(35.34)
    assert k.get("occ_limit_warps") == 16 and k.get("registers_per_thread") == 16
    assert k.get("waves_per_sm") == pytest.approx(7943.76)
    assert k.get("stall_long_scoreboard") is None          # the basic set has no stall metrics
    units = {m.name: m.unit for m in k.metrics}
    assert units["duration_us"] == "us" and units["grid_size"] == "blocks"


def _csv(rows):
    return "\n".join(",".join(f'"{c}"' for c in r) for r in rows)


def test_parse_converts_units_and_skips_bad_rows():
    text = "program output\n" + _csv([
        ["ID", "Kernel Name", "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes.sum.per_second",
         "some__unknown_metric"],
        ["", "", "usecond", "Mbyte", "Tbyte/second", "x"],
        ["0", "k1", "12.5", "1,024", "3.2", "7"],
        ["1", "k2", "n/a", "2", "1"],                                 # wrong width: skipped
        ["2", "k2", "3", "2", "1", "7"],
    ]) + "\n==PROF== Disconnected from process 1\n"
    ks = parse_raw_csv(text)
    assert [k.kernel for k in ks] == ["k1", "k2"]
    assert ks[0].duration_us == 12.5 and ks[0].get("dram_bytes_read") == pytest.approx(1.024e9)
    assert ks[0].get("dram_bw_gbs") == pytest.approx(3200.0)
    assert ks[0].get("some__unknown_metric") is None
    assert parse_raw_csv("no table here") == []


def test_stall_shares_sum_to_one():
    shares = stall_shares({"stall_long_scoreboard": 6.0, "stall_barrier": 2.0, "stall_wait": 0.0,
                           "duration_us": 5.0})
    assert shares == {"stall_long_scoreboard": 0.75, "stall_barrier": 0.25}
    assert stall_shares({}) == {}
    assert len(STALL_NAMES) == len(set(STALL_NAMES))
