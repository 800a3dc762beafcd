"""RecordingClient keeps every exchange; ReplayClient serves them again, and only them."""

from __future__ import annotations

import json

import pytest
from fake_server import Error, Reply

from tritonforge.llm.client import RecordingClient, ReplayClient
from tritonforge.llm.errors import LLMConfigError, ReplayMiss
from tritonforge.llm.types import Message, request_key

A = [Message("user", "question A")]
B = [Message("user", "question B")]


def test_recording_writes_one_json_line_per_exchange_and_error(client, server, tmp_path):
    path = tmp_path / "run" / "llm" / "transcript.jsonl"
    rec = RecordingClient(client, path)
    server.add(Reply("answer A", 10, 2), Error(400, "bad request"))
    rec.complete(A, max_tokens=64, temperature=0.2)
    with pytest.raises(LLMConfigError):
        rec.complete(B, max_tokens=64, temperature=0.2)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["exchange", "error"]
    first = lines[0]
    assert first["key"] == request_key(A) and first["messages"][0]["content"] == "question A"
    assert first["reply"]["text"] == "answer A" and first["reply"]["prompt_tokens"] == 10
    assert first["client_model"] == "fake-model" and first["max_tokens"] == 64
    assert "HTTP 400" in lines[1]["error"]


def test_replay_serves_recorded_replies_in_order_and_fails_loudly_otherwise(client, server,
                                                                            tmp_path):
    path = tmp_path / "t.jsonl"
    rec = RecordingClient(client, path)
    server.add(Reply("A1", 5, 1), Reply("B1", 6, 1), Reply("A2", 5, 2))
    for msgs in (A, B, A):
        rec.complete(msgs, max_tokens=64, temperature=0.2)
    replay = ReplayClient(path)
    assert replay.model == "fake-model" and replay.remaining == 3
    # max_tokens may differ in a replay (the budget trims it): only the messages count.
    assert replay.complete(A, max_tokens=1, temperature=0).text == "A1"
    assert replay.complete(A, max_tokens=1, temperature=0).text == "A2"
    r = replay.complete(B, max_tokens=1, temperature=0)
    assert (r.text, r.usage.prompt_tokens, r.replayed) == ("B1", 6, True)
    assert replay.remaining == 0
    with pytest.raises(ReplayMiss, match="all were served"):
        replay.complete(A, max_tokens=1, temperature=0)
    with pytest.raises(ReplayMiss, match="never recorded.*question C"):
        replay.complete([Message("user", "question C")], max_tokens=1, temperature=0)


def test_replay_of_a_missing_transcript_says_where_to_look(tmp_path):
    with pytest.raises(ReplayMiss, match="does not exist"):
        ReplayClient(tmp_path / "nope.jsonl")


def test_truncated_last_line_of_a_killed_run_is_skipped(client, server, tmp_path):
    path = tmp_path / "t.jsonl"
    server.add(Reply("A1"))
    RecordingClient(client, path).complete(A, max_tokens=8, temperature=0)
    with path.open("a") as fh:
        fh.write('{"kind": "exchange", "key": "abc", "rep')
    assert ReplayClient(path).complete(A, max_tokens=8, temperature=0).text == "A1"
