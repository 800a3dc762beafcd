"""The HTTP clients against a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from fake_server import Error, Reply, ScriptedChatServer, Stall

from tritonforge.config import Settings
from tritonforge.llm.anthropic_client import AnthropicChatClient
from tritonforge.llm.client import OpenAIChatClient, RecordingClient, build_client
from tritonforge.llm.errors import LLMConfigError, LLMUnavailable
from tritonforge.llm.retry import parse_retry_after
from tritonforge.llm.types import Message

MSGS = [Message("system", "be brief"), Message("user", "hello")]


def make(server, waits=None, **kw) -> OpenAIChatClient:
    kw.setdefault("timeout_s", 2.0)
    kw.setdefault("max_retries", 2)
    return OpenAIChatClient(server.base_url, "fake-model", "sk-test", backoff_s=0.01,
                            sleep=(waits.append if waits is not None else time.sleep), **kw)


def test_completion_text_usage_and_request_shape(server):
    server.add(Reply("hi there", prompt_tokens=12, completion_tokens=3))
    reply = make(server).complete(MSGS, max_tokens=77, temperature=0.3)
    assert (reply.text, reply.usage.prompt_tokens, reply.usage.completion_tokens) == \
        ("hi there", 12, 3)
    assert reply.attempts == 1 and reply.finish_reason == "stop" and not reply.usage.estimated
    body = server.requests[0]
    assert server.paths == ["/v1/chat/completions"]
    assert body["model"] == "fake-model" and body["max_tokens"] == 77
    assert body["temperature"] == 0.3
    assert body["messages"] == [{"role": "system", "content": "be brief"},
                                {"role": "user", "content": "hello"}]
    assert server.headers[0]["authorization"] == "Bearer sk-test"


def test_429_is_retried_after_the_servers_retry_after(server):
    server.add(Error(429, "rate limited", retry_after="7"), Reply("ok"))
    waits: list[float] = []
    reply = make(server, waits).complete(MSGS, max_tokens=10, temperature=0)
    assert reply.text == "ok" and reply.attempts == 2
    assert waits == [7.0] and len(server.requests) == 2


def test_timeout_is_retried(server):
    server.add(Stall(1.5), Reply("late but fine"))
    start = time.monotonic()
    reply = make(server, timeout_s=0.3).complete(MSGS, max_tokens=10, temperature=0)
    assert reply.text == "late but fine" and reply.attempts == 2
    assert time.monotonic() - start < 1.4


def test_5xx_retried_with_backoff_until_exhausted(server):
    server.add(Error(503), Error(502), Error(500))
    waits: list[float] = []
    with pytest.raises(LLMUnavailable, match="after 3 attempts.*HTTP 500"):
        make(server, waits).complete(MSGS, max_tokens=10, temperature=0)
    assert len(waits) == 2 and waits[1] > waits[0]       # exponential backoff


def test_auth_error_is_not_retried_and_says_what_to_fix(server):
    server.add(Error(401, "bad key"), Reply("never"))
    with pytest.raises(LLMConfigError, match="HTTP 401") as exc:
        make(server).complete(MSGS, max_tokens=10, temperature=0)
    assert "API key" in exc.value.hint and len(server.requests) == 1


def test_retry_after_beyond_the_cap_fails_fast(server):
    server.add(Error(429, retry_after="3600"))
    with pytest.raises(LLMUnavailable, match="wait 3600 s"):
        make(server, []).complete(MSGS, max_tokens=10, temperature=0)


def test_missing_usage_is_estimated(server):
    server.add(Reply("x" * 300, include_usage=False))
    reply = make(server).complete(MSGS, max_tokens=10, temperature=0)
    assert reply.usage.estimated and reply.usage.completion_tokens == 100


def test_connection_refused_is_unavailable():
    with ScriptedChatServer() as srv:
        url = srv.base_url
    client = OpenAIChatClient(url, "m", "k", timeout_s=1, max_retries=1, backoff_s=0.01,
                              sleep=lambda s: None)
    with pytest.raises(LLMUnavailable, match="connection"):
        client.complete(MSGS, max_tokens=10, temperature=0)


def test_retry_after_formats():
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None and parse_retry_after({}) is None


def test_anthropic_client_speaks_the_messages_api():
    with ScriptedChatServer([Error(529, "overloaded"), Reply("bonjour", 20, 4)]) as srv:
        client = AnthropicChatClient(f"http://127.0.0.1:{srv.port}", "claude-x", "ak",
                                     timeout_s=2, max_retries=2, backoff_s=0.01,
                                     sleep=lambda s: None)
        reply = client.complete(MSGS, max_tokens=50, temperature=0)
    assert (reply.text, reply.usage.prompt_tokens, reply.attempts) == ("bonjour", 20, 2)
    assert srv.paths[-1] == "/v1/messages" and srv.headers[-1]["x-api-key"] == "ak"
    assert srv.requests[-1]["system"] == "be brief"
    assert srv.requests[-1]["messages"] == [{"role": "user", "content": "hello"}]


def test_build_client_from_settings_reads_the_key_from_the_named_variable(server, tmp_path):
    settings = Settings(llm_base_url=server.base_url, llm_model="qwen", llm_api_key_env="MY_KEY")
    client = build_client(settings, tmp_path, env={"MY_KEY": "secret"})
    assert isinstance(client, RecordingClient) and client.model == "qwen"
    server.add(Reply("ok"))
    client.complete(MSGS, max_tokens=5, temperature=0)
    assert server.headers[0]["authorization"] == "Bearer secret"
    assert (tmp_path / "llm" / "transcript.jsonl").exists()


def test_hosted_api_without_key_is_a_config_error():
    with pytest.raises(LLMConfigError, match="no API key"):
        build_client(Settings(llm_model="gpt-x"), env={})
    with pytest.raises(LLMConfigError, match="unknown llm_provider"):
        build_client(Settings(llm_model="x", llm_provider="bard"), env={})


def test_local_server_needs_no_key(server):
    client = build_client(Settings(llm_base_url=server.base_url, llm_model="llama"), env={})
    server.add(Reply("ok"))
    assert client.complete(MSGS, max_tokens=5, temperature=0).text == "ok"


def test_importing_the_llm_package_does_not_import_openai():
    code = ("import sys, tritonforge.llm, tritonforge.llm.client, tritonforge.llm.proposer, "
            "tritonforge.search.repair; assert 'openai' not in sys.modules, 'openai imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_build_proposer_is_optional_and_honours_replay(server, tmp_path):
    from tritonforge.llm.factory import build_proposer

    assert build_proposer(Settings()) is None                  # no model: rules only
    settings = Settings(llm_base_url=server.base_url, llm_model="qwen", llm_max_tokens=5000,
                        llm_candidates_per_round=3)
    p = build_proposer(settings, tmp_path, env={})
    assert p.name == "llm:qwen" and p.budget.max_tokens == 5000
    assert p.candidates_per_round == 3 and isinstance(p.client, RecordingClient)
    server.add(Reply("ok"))
    p.client.complete(MSGS, max_tokens=5, temperature=0)
    transcript = tmp_path / "llm" / "transcript.jsonl"
    replayed = build_proposer(Settings(llm_replay=str(transcript)), env={})
    assert replayed.name == "llm:qwen"
    assert replayed.client.complete(MSGS, max_tokens=5, temperature=0).replayed
