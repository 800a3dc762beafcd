"""scripts/records_compare.py: two passes' records of the same kernels, before -> after."""

import json

import pytest


def _write(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n{torn\n")


def test_the_records_in_both_are_compared_and_the_last_line_of_a_name_wins(script, tmp_path):
    before, after = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(before, [
        {"name": "k1", "status": "not-improved", "speedup": 1.0, "verified": 1, "wall_s": 48.0,
         "first_verified_s": 45.0, "rounds": 1, "engine_commit": "old"},
        {"name": "k2", "status": "success", "speedup": 1.3, "verified": 4, "wall_s": 110.0,
         "first_verified_s": None, "rounds": 1, "engine_commit": "old"},
        {"name": "only_before", "status": "success", "verified": 9, "engine_commit": "old"},
    ])
    _write(after, [
        {"name": "k1", "status": "not-improved", "speedup": 1.0, "verified": 2, "wall_s": 60.0,
         "engine_commit": "new"},
        {"name": "k1", "status": "success", "speedup": 1.25, "verified": 20, "wall_s": 118.0,
         "first_verified_s": 21.0, "rounds": 3, "engine_commit": "new"},
        {"name": "k2", "status": "success", "speedup": 1.31, "verified": 6, "wall_s": 100.0,
         "first_verified_s": 30.0, "rounds": 2, "engine_commit": "new"},
    ])
    rc = script("records_compare")
    table = rc.compare(rc.read_records(before), rc.read_records(after))
    assert "| k1 | not-improved -> success | 1.00x -> 1.25x | 1 -> 20 | 45 s -> 21 s | 1 -> 3 | 48 s -> 118 s |" in table
    assert "| k2 | success -> success | 1.30x -> 1.31x | 4 -> 6 | - -> 30 s |" in table
    assert "only_before" not in table
    assert "| verified | 2.5 | 13.0 |" in table
    assert "| successes | 1 of 2 | 2 of 2 |" in table
    assert "| engine | old | new |" in table
    only = rc.compare(rc.read_records(before), rc.read_records(after), ["k2"])
    assert "| k1 |" not in only and "1 of 1" in only
    with pytest.raises(SystemExit):
        rc.compare(rc.read_records(before), rc.read_records(after), ["only_before"])
