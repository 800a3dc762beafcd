"""A chat client for any OpenAI-compatible ``/chat/completions`` endpoint.

One client covers hosted APIs (OpenAI, and any provider with an OpenAI-compatible URL) and local
servers (vLLM, SGLang, llama.cpp's server, Ollama): they differ only in base URL, model name and
whether a key is needed. The official ``openai`` package is imported when the client is built,
never at module import, because the GPU image does not ship it.

The SDK's own retries are turned off (``max_retries=0``); ``retry.call_with_retries`` retries
timeouts, connection errors, 408/409/429 and 5xx with backoff and honours Retry-After.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Sequence

from ..errors import EnvironmentProblem
from .errors import LLMConfigError, LLMError
from .retry import RetryPolicy, Transient, call_with_retries, parse_retry_after
from .types import ChatReply, Message, Usage, estimate_tokens

log = logging.getLogger(__name__)

# Local servers accept any key but the SDK insists on one.
PLACEHOLDER_KEY = "not-needed"
_RETRIED_STATUS = {408, 409, 429}


def _import_openai() -> Any:
    try:
        import openai   # optional (the llm extra): the GPU image has none
    except ImportError:
        raise EnvironmentProblem(
            "the 'openai' package is not installed; the LLM proposer needs it",
            hint="pip install 'tritonforge[llm]' (or run without llm_base_url / llm_model: the "
                 "rule engine works alone)") from None
    return openai


class OpenAIChatClient:
    """Chat completions over HTTP with retries, timeouts and Retry-After.

    ``base_url`` is the API root including ``/v1`` (e.g. ``http://127.0.0.1:8000/v1`` for
    vLLM, ``http://localhost:11434/v1`` for Ollama); empty means OpenAI's hosted API, which
    needs ``api_key``.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float = 120.0,
                 max_retries: int = 4, *, backoff_s: float = 1.0,
                 sleep: Callable[[float], None] = time.sleep):
        if not model:
            raise LLMConfigError("no LLM model named",
                                 hint="set llm_model (TRITONFORGE_LLM_MODEL), e.g. the model name "
                                      "your vLLM server serves")
        if not base_url and not api_key:
            raise LLMConfigError("no API key for the hosted OpenAI API",
                                 hint="export OPENAI_API_KEY (or the variable named by "
                                      "llm_api_key_env), or set llm_base_url to a local server")
        openai = _import_openai()
        self.model = model
        self.base_url = base_url
        self.timeout_s = float(timeout_s)
        self.policy = RetryPolicy(max_retries=max_retries, backoff_s=backoff_s)
        self._sleep = sleep
        self._openai = openai
        self._client = openai.OpenAI(base_url=base_url or None,
                                     api_key=api_key or PLACEHOLDER_KEY,
                                     timeout=self.timeout_s, max_retries=0)

    def __repr__(self) -> str:
        return f"OpenAIChatClient(base_url={self.base_url!r}, model={self.model!r})"

    def _attempt(self, payload: list[dict[str, str]], max_tokens: int,
                 temperature: float) -> tuple[Any, float]:
        oa = self._openai
        start = time.monotonic()
        try:
            resp = self._client.chat.completions.create(
                model=self.model, messages=payload, max_tokens=max_tokens,
                temperature=temperature)
        except oa.APITimeoutError:
            raise Transient(f"no reply within {self.timeout_s:g} s") from None
        except oa.APIConnectionError as exc:
            raise Transient(f"connection failed: {exc}") from None
        except oa.APIStatusError as exc:
            code = exc.status_code
            detail = f"HTTP {code}: {exc.message}"
            if code in _RETRIED_STATUS or code >= 500:
                raise Transient(detail, parse_retry_after(dict(exc.response.headers))) from None
            hint = {401: "check the API key (llm_api_key_env names the variable)",
                    403: "the key may lack access to this model",
                    404: "check llm_base_url (it usually ends in /v1) and llm_model"}.get(
                        code, "the server refused the request; see the message")
            raise LLMConfigError(f"{self.base_url or 'OpenAI'} refused the request: {detail}",
                                 hint=hint) from None
        return resp, time.monotonic() - start

    def complete(self, messages: Sequence[Message], *, max_tokens: int,
                 temperature: float) -> ChatReply:
        payload = [{"role": m.role, "content": m.content} for m in messages]
        (resp, latency), attempts = call_with_retries(
            lambda: self._attempt(payload, max_tokens, temperature), self.policy,
            what=f"chat request to {self.base_url or 'OpenAI'} ({self.model})", sleep=self._sleep)
        if not resp.choices:
            raise LLMError(f"{self.model} returned no choices",
                           hint="the server answered without a message; check its logs")
        choice = resp.choices[0]
        text = choice.message.content or ""
        if resp.usage is not None and resp.usage.total_tokens:
            usage = Usage(resp.usage.prompt_tokens or 0, resp.usage.completion_tokens or 0)
        else:   # some local servers omit usage: count it ourselves so the budget still holds
            usage = Usage(sum(estimate_tokens(m.content) for m in messages),
                          estimate_tokens(text), estimated=True)
        return ChatReply(
            text=text,
            usage=usage,
            model=resp.model or self.model,
            finish_reason=choice.finish_reason or "",
            latency_s=latency, attempts=attempts)
