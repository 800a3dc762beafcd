"""Keep every prompt and reply in the run directory, and replay a run from that record.

``RecordingClient`` wraps any client and appends one JSON line per request to a transcript
(``<run_dir>/llm/transcript.jsonl``): the messages, the settings, the reply text and usage, or the
error. Lines are flushed as they are written, so a killed run keeps what it paid for.

``ReplayClient`` serves those replies again, keyed by ``request_key`` (a hash of the messages),
without a model: a recorded run re-runs exactly (same prompts, same replies, same usage charged to
the budget). A request the transcript does not hold raises ``ReplayMiss`` rather than guessing;
identical requests made several times are answered in the recorded order.
"""

from __future__ import annotations

import collections
import datetime
import json
import logging
import threading
from pathlib import Path
from typing import Any, Sequence

from .errors import ReplayMiss
from .types import ChatClient, ChatReply, Message, Usage, request_key

log = logging.getLogger(__name__)

TRANSCRIPT_VERSION = 1


def _reply_to_json(reply: ChatReply) -> dict[str, Any]:
    return {"text": reply.text, "prompt_tokens": reply.usage.prompt_tokens,
            "completion_tokens": reply.usage.completion_tokens,
            "estimated": reply.usage.estimated, "model": reply.model,
            "finish_reason": reply.finish_reason, "latency_s": round(reply.latency_s, 4),
            "attempts": reply.attempts}


def _reply_from_json(data: dict[str, Any]) -> ChatReply:
    return ChatReply(text=data["text"],
                     usage=Usage(int(data.get("prompt_tokens", 0)),
                                 int(data.get("completion_tokens", 0)),
                                 bool(data.get("estimated", False))),
                     model=data.get("model", ""), finish_reason=data.get("finish_reason", ""),
                     latency_s=0.0, attempts=0, replayed=True)


class RecordingClient:
    """Pass requests to ``inner`` and append each exchange (or error) to ``transcript_path``."""

    def __init__(self, inner: ChatClient, transcript_path: str | Path):
        self.inner = inner
        self.model = inner.model
        self.path = Path(transcript_path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._seq = sum(1 for _ in self.path.open(encoding="utf-8")) if self.path.exists() else 0

    def __repr__(self) -> str:
        return f"RecordingClient({self.inner!r}, {str(self.path)!r})"

    def _append(self, record: dict[str, Any]) -> None:
        with self._lock:
            record = {"v": TRANSCRIPT_VERSION, "seq": self._seq,
                      "time": datetime.datetime.now(datetime.timezone.utc).isoformat(
                          timespec="seconds"), **record}
            self._seq += 1
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
                fh.flush()

    def complete(self, messages: Sequence[Message], *, max_tokens: int,
                 temperature: float) -> ChatReply:
        base = {"key": request_key(messages), "client_model": self.model,
                "max_tokens": max_tokens, "temperature": temperature,
                "messages": [{"role": m.role, "content": m.content} for m in messages]}
        try:
            reply = self.inner.complete(messages, max_tokens=max_tokens, temperature=temperature)
        except Exception as exc:
            self._append({"kind": "error", **base, "error": str(exc),
                          "error_type": type(exc).__name__})
            raise
        self._append({"kind": "exchange", **base, "reply": _reply_to_json(reply)})
        return reply


def read_transcript(path: str | Path) -> list[dict[str, Any]]:
    """All records of a transcript, in order; a truncated last line (killed run) is skipped."""
    p = Path(path)
    if not p.exists():
        raise ReplayMiss(f"transcript {p} does not exist",
                         hint="replay needs the transcript.jsonl of a recorded run "
                              "(<run_dir>/llm/transcript.jsonl)")
    records = []
    lines = p.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if n == len(lines) - 1:
                log.warning("%s: last line is truncated (killed run?); ignored", p)
                continue
            raise ReplayMiss(f"line {n + 1} is not JSON", location=str(p)) from None
    return records


class ReplayClient:
    """Answer requests from a recorded transcript, never from a model."""

    def __init__(self, transcript_path: str | Path):
        self.path = Path(transcript_path)
        self._queues: dict[str, collections.deque[ChatReply]] = {}
        self._served: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        model = ""
        for rec in read_transcript(self.path):
            if rec.get("kind") != "exchange":
                continue
            self._queues.setdefault(rec["key"], collections.deque()).append(
                _reply_from_json(rec["reply"]))
            model = model or rec.get("client_model", "")
        self.model = model or "replay"

    def __repr__(self) -> str:
        return f"ReplayClient({str(self.path)!r})"

    @property
    def remaining(self) -> int:
        """Recorded replies not served yet (0 after a faithful replay of the whole run)."""
        return sum(len(q) for q in self._queues.values())

    def complete(self, messages: Sequence[Message], *, max_tokens: int,
                 temperature: float) -> ChatReply:
        key = request_key(messages)
        with self._lock:
            queue = self._queues.get(key)
            if not queue:
                last_user = next((m.content for m in reversed(messages) if m.role == "user"), "")
                seen = self._served[key]
                why = (f"it was recorded {seen} time(s) and all were served" if seen
                       else "it was never recorded")
                raise ReplayMiss(
                    f"request {key} is not in the transcript ({why}); it begins: "
                    f"{last_user[:160]!r}",
                    location=str(self.path),
                    hint="replay needs the same task, settings and templates as the recorded run;"
                         " a changed prompt template or history changes the request")
            self._served[key] += 1
            return queue.popleft()
