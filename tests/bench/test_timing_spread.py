"""scripts/timing_spread.py: how widely the reference's timings spread, by call time."""

import json
import sqlite3


def _store(path, rows):
    con = sqlite3.connect(path)
    con.execute("create table evaluations (id integer primary key, key text, task text, "
                "purpose text, device text, interpreted integer, body text, created real)")
    con.execute("create table timings (evaluation integer, variant text, case_id text, "
                "method text, median_ms real, samples text)")
    for eid, (task, purpose, variant, samples) in enumerate(rows, 1):
        con.execute("insert into evaluations values (?, ?, ?, ?, 'cuda', 0, '{}', 0)",
                    (eid, f"key{eid}", task, purpose))
        s = sorted(samples)
        con.execute("insert into timings values (?, ?, 'p', 'cuda_events', ?, ?)",
                    (eid, variant, s[len(s) // 2], json.dumps(samples)))
    con.commit()
    con.close()


def test_bimodal_small_cases_count_as_wide_and_candidates_are_left_out(script, tmp_path):
    store = tmp_path / "store.sqlite"
    steady = [0.0075] * 30
    bimodal = [0.0075] * 15 + [0.04] * 15                   # l2_norm_triton1's perf-10, in shape
    _store(store, [("a:x", "baseline", "original", steady),
                   ("b:y", "time", "incumbent", bimodal),
                   ("b:y", "time", "c0", bimodal),            # a candidate: not the reference
                   ("c:z", "final", "original", [2.0] * 10),  # too few samples
                   ("d:w", "final", "original", [0.3] * 25)])
    ts = script("timing_spread")
    rows = ts.spreads(store)
    assert sorted((r[0], r[1]) for r in rows) == [("a", "baseline"), ("b", "time"), ("d", "final")]
    table = ts.render(rows)
    assert "| under 50 us | 2 | 50% | 50% |" in table
    assert "| 50 us to 1 ms | 1 | 0% | 0% |" in table and "| over 1 ms | 0 | - | - |" in table
    assert [r[0] for r in ts.spreads(store, {"time"})] == ["b"]
    assert ts.main([str(store), "--purposes", "baseline,final"]) == 0
