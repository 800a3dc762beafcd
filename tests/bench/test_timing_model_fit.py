"""scripts/timing_model_fit.py: the budget's timing model against the timing a store recorded."""

import json
import sqlite3

import pytest


def _store(path, seconds):
    con = sqlite3.connect(path)
    con.execute("create table evaluations (id integer primary key, key text, task text, "
                "purpose text, device text, interpreted integer, body text, created real)")

    def result(variant, ms):
        return {"variant": variant, "timings": [{"case_id": c, "samples_ms": [ms] * 5}
                                                for c in ("p1", "p2")]}

    base = {"notes": ["worker seconds (autotune short): import 0.0, timing 1.0"],
            "results": [result("original", 0.005)]}
    timed = {"notes": [f"worker seconds (autotune short): import 0.0, first runs 0.2, "
                       f"timing {seconds}, shipped check 0.1"],
             "results": [result("incumbent", 0.005), result("c0", 0.004)]}
    for eid, purpose, body in ((1, "baseline", base), (2, "time", timed)):
        con.execute("insert into evaluations values (?, ?, 'k', ?, 'cuda', 0, ?, 0)",
                    (eid, f"key{eid}", purpose, json.dumps(body)))
    con.commit()
    con.close()


def test_a_request_is_read_and_its_ratio_falls_with_the_per_call_overhead(script, tmp_path, capsys):
    store = tmp_path / "store.sqlite"
    _store(store, 3.0)
    fit = script("timing_model_fit")
    got = fit.requests([str(store)])
    assert got == [("k", "time", 3.0, 2, [0.005, 0.005])]
    assert fit.main([str(store)]) == 0
    out = capsys.readouterr().out
    ratios = [float(line.split("median ")[1].split(",")[0]) for line in out.splitlines()
              if line.startswith("overhead")]
    assert len(ratios) == len(fit.OVERHEADS_MS) and ratios == sorted(ratios, reverse=True)
    assert ratios[0] > ratios[-1] > 0


def test_a_store_without_timing_says_so(script, tmp_path):
    store = tmp_path / "store.sqlite"
    _store(store, 3.0)
    con = sqlite3.connect(store)
    con.execute("delete from evaluations where purpose = 'time'")
    con.commit()
    con.close()
    assert script("timing_model_fit").main([str(store)]) == 1
