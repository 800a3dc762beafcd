"""A chat client for Anthropic's Messages API, over the standard library's HTTP.

Optional: most users point TritonForge at an OpenAI-compatible URL. This client exists because
Anthropic's API is not OpenAI-compatible; it needs no extra package (``urllib`` only), shares the
retry loop with the OpenAI client, and maps the system message to the API's ``system`` field.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Sequence

from .errors import LLMConfigError, LLMError
from .retry import RetryPolicy, Transient, call_with_retries, parse_retry_after
from .types import ChatReply, Message, Usage

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"


class AnthropicChatClient:
    """``POST {base_url}/v1/messages`` with the ``x-api-key`` header, retried like the others."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float = 120.0,
                 max_retries: int = 4, *, backoff_s: float = 1.0,
                 sleep: Callable[[float], None] = time.sleep):
        if not model:
            raise LLMConfigError("no LLM model named", hint="set llm_model, e.g. a Claude model id")
        if not api_key:
            raise LLMConfigError("no API key for Anthropic",
                                 hint="export ANTHROPIC_API_KEY and set "
                                      "llm_api_key_env = \"ANTHROPIC_API_KEY\"")
        self.model = model
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        self._key = api_key
        self.timeout_s = float(timeout_s)
        self.policy = RetryPolicy(max_retries=max_retries, backoff_s=backoff_s)
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"AnthropicChatClient(base_url={self.base_url!r}, model={self.model!r})"

    def _attempt(self, body: bytes) -> tuple[dict[str, Any], float]:
        req = urllib.request.Request(
            f"{self.base_url}/v1/messages", data=body, method="POST",
            headers={"content-type": "application/json", "x-api-key": self._key,
                     "anthropic-version": API_VERSION})
        start = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                data = json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = f"HTTP {exc.code}: {exc.read().decode('utf-8', 'replace')[:300]}"
            if exc.code in (408, 409, 429, 529) or exc.code >= 500:
                raise Transient(detail, parse_retry_after(dict(exc.headers or {}))) from None
            raise LLMConfigError(f"Anthropic refused the request: {detail}",
                                 hint="check the key, the model id and llm_base_url") from None
        except (socket.timeout, TimeoutError):
            raise Transient(f"no reply within {self.timeout_s:g} s") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (socket.timeout, TimeoutError)):
                raise Transient(f"no reply within {self.timeout_s:g} s") from None
            raise Transient(f"connection failed: {exc.reason}") from None
        return data, time.monotonic() - start

    def complete(self, messages: Sequence[Message], *, max_tokens: int,
                 temperature: float) -> ChatReply:
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        body: dict[str, Any] = {
            "model": self.model, "max_tokens": max_tokens, "temperature": temperature,
            "messages": [{"role": m.role, "content": m.content}
                         for m in messages if m.role != "system"]}
        if system:
            body["system"] = system
        raw = json.dumps(body).encode("utf-8")
        (data, latency), attempts = call_with_retries(
            lambda: self._attempt(raw), self.policy,
            what=f"Anthropic request ({self.model})", sleep=self._sleep)
        try:
            text = "".join(part.get("text", "") for part in data["content"]
                           if part.get("type") == "text")
            usage = data.get("usage") or {}
        except (KeyError, TypeError, AttributeError):
            raise LLMError(f"Anthropic returned an unexpected body: {str(data)[:300]}") from None
        return ChatReply(text=text,
                         usage=Usage(int(usage.get("input_tokens", 0)),
                                     int(usage.get("output_tokens", 0))),
                         model=data.get("model", self.model),
                         finish_reason=str(data.get("stop_reason") or ""),
                         latency_s=latency, attempts=attempts)
