"""A pass's bookkeeping: records.jsonl lines, the one-engine rule, LATEST.json's figures (each
computed from fabricated records), the Markdown tables."""

import dataclasses
import json
import math

import pytest

from tritonforge.bench.engine import EngineId, engine_id, settings_hash, source_hash
from tritonforge.bench.latest import (figures, latest_json, quartile_of, render_markdown,
                                      summarize, write_latest)
from tritonforge.bench.records import (PassRecord, RecordRef, append_record, check_one_engine,
                                       pass_record, read_records)
from tritonforge.config import Settings
from tritonforge.errors import ConfigError
from tritonforge.model import Candidate, Decision
from tritonforge.search.loop import OptimizeResult

ENGINE = EngineId("abc123", "srchash")
ORIG = Candidate("x = 1\n", "original")
BEST = Candidate("x = 2\n", "rules:tile", ORIG.hash, "BLOCK 64 -> 128")


def rec(name, speedup=1.0, accepted=None, wall=100.0, cands=6, cat="A", lines=10, **kw):
    accepted = speedup != 1.0 if accepted is None else accepted
    status = ("success" if accepted and speedup >= 1.05 else
              "below-threshold" if accepted else "not-improved")
    return PassRecord(name, ENGINE.commit, ENGINE.source_hash, "s1", status, speedup,
                      speedup * 0.9 if accepted else None, wall, 150.0, cands, 2, "stop", "",
                      "h rules: x" if accepted else "", "src" if accepted else "", cat, lines, **kw)


def test_pass_record_from_an_optimize_result():
    final = Decision(BEST.hash, True, 2.5, 2.2, 2.4, 1.0, "faster")
    result = OptimizeResult("k", ORIG, BEST, final, 3, "no gain", 123.4, 7)
    r = pass_record(RecordRef("k", "Cat", 40), result, ENGINE, "s1", 150.0, gpu="H100")
    assert (r.status, r.speedup, r.speedup_low, r.candidates, r.rounds) == ("success", 2.5, 2.2, 7, 3)
    assert r.accepted.startswith(BEST.hash[:12]) and "BLOCK 64 -> 128" in r.accepted
    assert r.accepted_source == BEST.source and r.engine_commit == "abc123" and r.gpu == "H100"
    # accepted, yet below 1.05x: not a success; nothing accepted: 1.0x and no source kept
    slow = dataclasses.replace(result, final=dataclasses.replace(final, speedup=1.02))
    assert pass_record(RecordRef("k"), slow, ENGINE, "s1", 150.0).status == "below-threshold"
    none = dataclasses.replace(result, best=ORIG, final=dataclasses.replace(final, accepted=False))
    r0 = pass_record(RecordRef("k"), none, ENGINE, "s1", 150.0)
    assert (r0.status, r0.speedup, r0.accepted, r0.accepted_source) == ("not-improved", 1.0, "", "")
    broken = dataclasses.replace(result, final=None, stop_reason="the original fails: boom")
    assert pass_record(RecordRef("k"), broken, ENGINE, "s1", 150.0).status == "original-fails"


def test_records_file_keeps_the_last_line_and_skips_a_torn_end(tmp_path):
    path = tmp_path / "records.jsonl"
    append_record(path, rec("a", 2.0))
    append_record(path, rec("b"))
    append_record(path, dataclasses.replace(rec("a", 2.0), reverified=False))
    with open(path, "a") as f:
        f.write('{"name": "c", "engine_com')          # a call killed mid-write
    got = read_records(path)
    assert list(got) == ["a", "b"] and got["a"].reverified is False
    append_record(path, rec("c"))                      # the torn line does not swallow it
    assert list(read_records(path)) == ["a", "b", "c"]
    path.write_text("not json\n" + json.dumps(dataclasses.asdict(rec("a"))) + "\n")
    with pytest.raises(Exception, match="not a JSON line"):
        read_records(path)


def test_a_resumed_pass_refuses_another_engines_records_unless_told():
    records = {"a": rec("a"), "b": dataclasses.replace(rec("b"), engine_source="other")}
    assert check_one_engine({"a": rec("a")}, ENGINE, "s1", False) == {"a": rec("a")}
    with pytest.raises(ConfigError, match="another engine") as err:
        check_one_engine(records, ENGINE, "s1", False)
    assert "--allow-mixed-engines" in err.value.render()
    with pytest.raises(ConfigError):
        check_one_engine({"a": rec("a")}, ENGINE, "other-settings", False)   # settings count too
    kept = check_one_engine(records, ENGINE, "s1", True)
    assert not kept["a"].mixed and kept["b"].mixed


def test_engine_identity_follows_the_sources(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("x = 1\n")
    before = source_hash(pkg)
    (pkg / "a.py").write_text("x = 2\n")
    assert source_hash(pkg) != before
    e = engine_id(pkg, env={"TRITONFORGE_ENGINE_COMMIT": "deadbeef" * 5})   # no git here
    assert e.commit == "deadbeefdead" and e.source_hash == source_hash(pkg)
    assert engine_id(pkg, env={}).commit.startswith("v")
    s = Settings()
    assert settings_hash(s, 150) == settings_hash(s.replace(run_dir="elsewhere"), 150)
    assert settings_hash(s, 150) != settings_hash(s, 120)
    assert settings_hash(s, 150) != settings_hash(s.replace(max_rounds=3), 150)
    # the paths of one call (a fresh temporary progress log each call) are not the pass's settings
    moved = s.replace(progress_log="/tmp/tmp.X/progress.log", tritonbench="/data/tb", ncu="/opt/ncu",
                      cache_dir="/c", gpu_lock="/tmp/lock")
    assert settings_hash(s, 150) == settings_hash(moved, 150)
    assert settings_hash(s, 150) != settings_hash(s.replace(ncu_lock="exclusive"), 150)


def test_figures_are_computed_from_the_records():
    rs = [rec("a", 2.0, wall=100, cands=4), rec("b", 1.5, wall=200, cands=8, reverified=True),
          rec("c", 1.02, wall=300, cands=6, reverified=False), rec("d", wall=160, cands=2)]
    f = figures(rs, runnable=5)
    assert (f.runnable, f.optimized, f.successes) == (5, 4, 2)
    assert f.success_rate == 0.5
    assert math.isclose(f.mean_speedup_over_successes, 1.75)
    assert math.isclose(f.geomean_all, round((2.0 * 1.5 * 1.02 * 1.0) ** 0.25, 4))
    assert f.best == 2.0 and f.median_wall_s == 180.0 and f.median_candidates == 5.0
    assert f.max_wall_over_budget == 2.0                 # 300 s of a 150 s budget
    assert (f.accepted, f.reverified, f.wrong_accepted) == (3, 2, 1)
    empty = figures([], 0)
    assert empty.optimized == 0 and empty.geomean_all is None and empty.success_rate == 0.0


def test_latest_json_splits_subset_and_others_and_says_why_not_publishable(tmp_path):
    records = {"a": rec("a", 2.0, reverified=True), "b": rec("b"), "c": rec("c", 1.5, redo=True)}
    s = summarize(records, ["a", "b", "c", "d"], ["a", "d"], date="D", gpu="H100", torch="2",
                  triton="3", per_kernel_s=150.0, engine_commit="abc123")
    assert (s.subset.runnable, s.subset.optimized, s.subset.successes) == (2, 1, 1)
    assert (s.others.runnable, s.others.optimized, s.others.successes) == (2, 2, 1)
    assert s.all.optimized == 3 and not s.publishable
    why = " ".join(s.why_not_publishable)
    assert "--redo" in why and "1 record(s) not optimized" in why and "not re-verified" in why
    data = json.loads(write_latest(s, tmp_path / "LATEST.json").read_text())
    for key in ("engine_commit", "date", "gpu", "torch", "triton", "per_kernel_s"):
        assert key in data
    for key in ("runnable", "optimized", "successes", "success_rate", "mean_speedup_over_successes",
                "geomean_all", "best", "median_wall_s", "max_wall_over_budget",
                "median_candidates", "wrong_accepted"):
        assert key in data["all"] and key in data["subset"] and key in data["others"]
    assert "records" not in data and data == latest_json(s)
    clean = summarize({"a": rec("a", 2.0, reverified=True), "b": rec("b")}, ["a", "b"], [],
                      date="D", gpu="g", torch="t", triton="t", per_kernel_s=1, engine_commit="e")
    assert clean.publishable and clean.why_not_publishable == ()


def test_tables_group_by_category_and_length_quartile():
    rs = [rec(f"k{i}", 2.0 if i % 2 else 1.0, cat="A" if i < 4 else "B", lines=10 * (i + 1))
          for i in range(8)]
    q = quartile_of(rs)
    assert [q[f"k{i}"] for i in range(8)] == ["Q1", "Q1", "Q2", "Q2", "Q3", "Q3", "Q4", "Q4"]
    s = summarize({r.name: r for r in rs}, [r.name for r in rs], [], date="D", gpu="g",
                  torch="t", triton="t", per_kernel_s=150, engine_commit="e")
    md = render_markdown(s)
    assert "| A | 4 | 2 | 50.0% |" in md and "| B | 4 | 2 | 50.0% |" in md
    assert "| Q4 (70-80 lines) | 2 | 1 | 50.0% |" in md


def test_isolation_ratio_is_beside_over_the_mean_alone_and_drift_is_alone_again_over_alone():
    from tritonforge.bench.isolation import IsolationCase

    c = IsolationCase("k", "p", alone_ms=1.0, beside_ms=1.03, alone_again_ms=1.02)
    assert math.isclose(c.ratio, 1.03 / 1.01) and math.isclose(c.drift, 1.02) and c.long
    assert not IsolationCase("k", "p", 0.01, 0.01, 0.01).long          # under 50 us


def test_the_named_engine_commit_wins_over_a_stale_checkouts_git():
    # the package's own checkout has git history: the variable still names the engine
    named = engine_id(env={"TRITONFORGE_ENGINE_COMMIT": "c0ffee" * 7})
    assert named.commit == "c0ffeec0ffee"


def test_search_breadth_is_recorded_and_summarized_with_named_groups():
    final = Decision(BEST.hash, True, 2.5, 2.2, 2.4, 1.0, "faster")
    result = OptimizeResult("k", ORIG, BEST, final, 3, "no gain", 123.4, 40, verified=31,
                            first_verified_s=22.5)
    r = pass_record(RecordRef("k"), result, ENGINE, "s1", 120.0)
    assert (r.verified, r.first_verified_s) == (31, 22.5)
    rs = {"a": rec("a", 2.0, verified=30, first_verified_s=20.0),
          "b": rec("b", verified=10, first_verified_s=None),
          "c": rec("c", verified=40, first_verified_s=40.0)}
    s = summarize(rs, ["a", "b", "c"], ["a"], date="D", gpu="g", torch="t", triton="t",
                  per_kernel_s=150, engine_commit="e", groups={"others-2": ["b", "c", "zz"]})
    assert s.all.median_verified == 30.0
    assert s.all.median_first_verified_s == 30.0          # b never had a verified candidate
    g = s.groups["others-2"]
    assert (g.runnable, g.optimized, g.median_verified) == (2, 2, 25.0)
    md = render_markdown(s)
    assert "## Search breadth" in md and "| others-2 | 2 | 6 | 25 | 40 s |" in md
    assert json.loads(json.dumps(latest_json(s)))["groups"]["others-2"]["median_verified"] == 25.0


def test_generated_cases_are_recorded_and_counted():
    from tritonforge.search.loop import GeneratedCounts

    final = Decision(BEST.hash, True, 2.5, 2.2, 2.4, 1.0, "faster")
    result = OptimizeResult("k", ORIG, BEST, final, 3, "no gain", 123.4, 40,
                            generated=GeneratedCounts(5, 2, 12.5, 0.4))
    r = pass_record(RecordRef("k"), result, ENGINE, "s1", 120.0)
    assert (r.generated_added, r.generated_dropped, r.generated_s, r.generated_verify_s) == \
        (5, 2, 12.5, 0.4)
    plain = pass_record(RecordRef("k"), OptimizeResult("k", ORIG, BEST, final, 3, "x", 1.0, 1),
                        ENGINE, "s1", 120.0)
    noted = pass_record(RecordRef("k"), OptimizeResult(
        "k", ORIG, BEST, final, 3, "x", 1.0, 1,
        notes=tuple(f"note {i} " + "x" * 500 for i in range(9))), ENGINE, "s1", 120.0)
    assert [n[:6] for n in noted.notes] == [f"note {i}" for i in range(3, 9)]   # the last six
    assert max(map(len, noted.notes)) == 240 and plain.notes == []
    assert (plain.generated_added, plain.generated_verify_s) == (0, None)
    rs = {"a": rec("a", generated_added=5, generated_dropped=2, generated_s=10.0,
                   generated_verify_s=0.5),
          "b": rec("b", generated_added=3, generated_dropped=0, generated_s=30.0),
          "c": rec("c")}
    f = figures(list(rs.values()), 3)
    assert (f.with_generated, f.generated_added, f.generated_dropped) == (2, 8, 2)
    assert f.median_generated_s == 20.0 and f.median_generated_verify_s == 0.5
    md = render_markdown(summarize(rs, ["a", "b", "c"], [], date="D", gpu="g", torch="t",
                                   triton="t", per_kernel_s=120, engine_commit="e"))
    assert "## Generated cases" in md and "| all | 3 | 2 | 8 | 2 | 20.0 s | 0.5 s |" in md


def test_a_record_keeps_its_phase_times_and_reads_back_from_its_line(tmp_path):
    from tritonforge.search.phases import PhaseTime

    final = Decision(BEST.hash, True, 2.5, 2.2, 2.4, 1.0, "faster")
    result = OptimizeResult("k", ORIG, BEST, final, 1, "no gain", 100.0, 16,
                            phases=(PhaseTime("baseline", 15.04, 0.0), PhaseTime("profile", 22.5, 1.0),
                                    PhaseTime("verify", 31.26, 0.0)))
    r = pass_record(RecordRef("k"), result, ENGINE, "s1", 120.0)
    assert list(r.phases) == ["baseline", "profile", "verify"]
    assert r.phases["verify"] == 31.3
    path = tmp_path / "records.jsonl"
    append_record(path, r)
    assert read_records(path)["k"].phases == r.phases


def test_the_tables_say_why_records_fell_short_by_group():
    lost = "the fresh-process final check rejected the search's best"
    def short(name, why):
        return dataclasses.replace(rec(name), held_back=why)
    rs = {"a": rec("a", 2.0), "b": short("b", lost), "c": short("c", lost),
          "d": short("d", "near the roofline"), "e": short("e", "accepted, but only 1.02x"),
          "f": short("f", "accepted, but only 1.03x")}
    md = render_markdown(summarize(rs, list(rs), ["b", "d"], date="D", gpu="g",
                                   torch="t", triton="t", per_kernel_s=120, engine_commit="e"))
    assert "## Why records fell short" in md
    assert f"| {lost} | 2 | 1 | 1 |" in md and "| near the roofline | 1 | 1 | 0 |" in md
    assert "| accepted, but under the success threshold | 2 | 0 | 2 |" in md
    assert md.index(lost) < md.index("| near the roofline")          # most common first
    table = md.split("## Why records fell short")[1].split("##")[0].strip().splitlines()[2:]
    assert sum(int(row.split("|")[2]) for row in table) == 5       # the success is not counted
