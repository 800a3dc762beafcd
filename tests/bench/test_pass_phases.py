"""scripts/pass_phases.py: where a pass's wall time went, phase by phase, per group."""

import json


def _write(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")


def test_phases_are_summed_per_group_and_the_rest_is_shown_apart(script, tmp_path):
    records = tmp_path / "records.jsonl"
    _write(records, [
        {"name": "a", "wall_s": 100.0, "phases": {"baseline": 20.0, "profile": 10.0, "verify": 50.0}},
        {"name": "b", "wall_s": 50.0, "phases": {"baseline": 10.0, "verify": 20.0}},
        {"name": "c", "wall_s": 70.0, "phases": {}},                 # before phases were kept
    ])
    group = tmp_path / "others.txt"
    group.write_text("# two of them\nb\nc\n")
    pp = script("pass_phases")
    table = pp.phase_table(pp.read_records(str(records)), "all")
    assert "(2 record(s) with phases)" in table
    assert "| baseline | 2 | 15.0 | 20.0 | 20% |" in table          # 30 of 150 s
    assert "| verify | 2 | 35.0 | 50.0 | 47% |" in table
    assert "| profile | 1 | 10.0 | 10.0 | 7% |" in table
    assert "| (no phase) | 2 | - | - | 27% |" in table               # 40 of 150 s
    assert pp.main([str(records), str(group)]) == 0
    only_b = pp.phase_table([r for r in pp.read_records(str(records)) if r["name"] in
                             set(pp.read_names(str(group)))], "others")
    assert "(1 record(s) with phases)" in only_b and "| baseline | 1 | 10.0 | 10.0 | 20% |" in only_b


def test_a_torn_line_and_a_resumed_record_read_as_the_last_whole_line(script, tmp_path):
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"name": "a", "wall_s": 10.0, "phases": {"verify": 1.0}}) + "\n"
                       + json.dumps({"name": "a", "wall_s": 20.0, "phases": {"verify": 5.0}}) + "\n"
                       + '{"name": "b", "wall')
    got = script("pass_phases").read_records(str(records))
    assert [(r["name"], r["wall_s"]) for r in got] == [("a", 20.0)]
