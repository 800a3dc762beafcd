"""A scripted OpenAI-compatible chat server on loopback, for tests (no network, no model).

``ScriptedChatServer(steps)`` listens on 127.0.0.1 with an ephemeral port in a daemon thread and
answers ``POST /v1/chat/completions`` (and Anthropic's ``POST /v1/messages``) from ``steps``, in
order, one step per request:

    Reply(text, prompt_tokens, completion_tokens)   a normal completion
    Error(status, body, retry_after)                an HTTP error (e.g. 429 with Retry-After)
    Stall(seconds)                                  wait without answering (client times out)
    a callable(request_json) -> step                decide from the request

Every request's JSON body is kept in ``server.requests``. A request past the end of the script
gets HTTP 500 with "script exhausted", so a test that asks more than it meant to fails loudly.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence, Union


@dataclass(frozen=True)
class Reply:
    text: str
    prompt_tokens: int = 100
    completion_tokens: int = 50
    finish_reason: str = "stop"
    include_usage: bool = True


@dataclass(frozen=True)
class Error:
    status: int
    message: str = "scripted error"
    retry_after: str | None = None


@dataclass(frozen=True)
class Stall:
    seconds: float


Step = Union[Reply, Error, Stall, Callable[[dict], Any]]


class ScriptedChatServer:
    def __init__(self, steps: Sequence[Step] = (), model: str = "fake-model"):
        self.steps = list(steps)
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def add(self, *steps: Step) -> None:
        with self._lock:
            self.steps.extend(steps)

    def __enter__(self) -> "ScriptedChatServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, body: dict) -> Any:
        with self._lock:
            self.requests.append(body)
            step: Any = self.steps.pop(0) if self.steps else Error(500, "script exhausted")
        while callable(step) and not isinstance(step, (Reply, Error, Stall)):
            step = step(body)
        return step

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:   # keep test output clean
                pass

            def _send(self, status: int, payload: dict, extra: dict[str, str] | None = None):
                data = json.dumps(payload).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (extra or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass    # the client gave up (timeout test)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.paths.append(self.path)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                step = server._next(body)
                anthropic = self.path.endswith("/messages")
                if isinstance(step, Stall):
                    time.sleep(step.seconds)
                    self.close_connection = True
                    return
                if isinstance(step, Error):
                    extra = {"Retry-After": step.retry_after} if step.retry_after else {}
                    self._send(step.status, {"error": {"message": step.message,
                                                       "type": "scripted"}}, extra)
                    return
                if anthropic:
                    self._send(200, {
                        "id": "msg_fake", "type": "message", "role": "assistant",
                        "model": body.get("model", server.model),
                        "content": [{"type": "text", "text": step.text}],
                        "stop_reason": "end_turn",
                        "usage": {"input_tokens": step.prompt_tokens,
                                  "output_tokens": step.completion_tokens}})
                    return
                payload: dict[str, Any] = {
                    "id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion",
                    "created": 0, "model": body.get("model", server.model),
                    "choices": [{"index": 0, "finish_reason": step.finish_reason,
                                 "message": {"role": "assistant", "content": step.text}}]}
                if step.include_usage:
                    payload["usage"] = {
                        "prompt_tokens": step.prompt_tokens,
                        "completion_tokens": step.completion_tokens,
                        "total_tokens": step.prompt_tokens + step.completion_tokens}
                self._send(200, payload)

        return Handler


def fenced(source: str, prose: str = "I changed the block size.") -> str:
    """A well-formed reply: prose, then the file in one ```python block."""
    return f"{prose}\n\n```python\n{source.rstrip()}\n```\n"
