"""scripts/store_verdicts.py: a run store's candidate verdicts counted per record."""

import sqlite3


def _store(path):
    con = sqlite3.connect(path)
    con.execute("create table evaluations (id integer primary key, key text, task text, "
                "purpose text, device text, interpreted integer, body text, created real)")
    con.execute("create table results (evaluation integer, variant text, hash text, status text, "
                "reason text, detail text)")
    rows = [(1, "k:abc", "verify", [("original", "ok", ""), ("candidate", "crash", "illegal | access")]),
            (2, "k:abc", "verify", [("original", "ok", ""), ("candidate", "crash", "illegal | access")]),
            (3, "k:abc", "time", [("incumbent", "ok", ""), ("c0", "ok", "")]),
            (4, "other:d", "verify", [("candidate", "mismatch", "")])]
    for eid, task, purpose, results in rows:
        con.execute("insert into evaluations values (?, ?, ?, ?, 'cuda', 0, '{}', 0)",
                    (eid, f"key{eid}", task, purpose))
        for variant, status, reason in results:
            con.execute("insert into results values (?, ?, 'h', ?, ?, '')", (eid, variant, status, reason))
    con.commit()
    con.close()


def test_candidates_are_counted_per_record_and_the_original_left_out(script, tmp_path):
    store = tmp_path / "store.sqlite"
    _store(store)
    sv = script("store_verdicts")
    counts = sv.verdicts(store)
    assert counts["k"] == {("verify", "crash", "illegal / access"): 2, ("time", "ok", ""): 1}
    assert set(sv.verdicts(store, {"other"})) == {"other"}
    table = sv.render(counts)
    assert "## k" in table and "| 2 | verify | crash | illegal / access |" in table
    assert sv.main([str(store), "--names", "k"]) == 0
