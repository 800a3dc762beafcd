"""Retries with exponential backoff, jitter and Retry-After, shared by every HTTP client.

The clients turn the SDK's retries off and use this loop instead, so that every client behaves
alike (same backoff, same cap on Retry-After), attempts are counted in the reply, and tests can
replace ``sleep`` to run in milliseconds.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from dataclasses import dataclass
from typing import Callable, Mapping, TypeVar

from .errors import LLMUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait. ``max_retries`` retries means max_retries + 1 attempts."""

    max_retries: int = 4
    backoff_s: float = 1.0          # first wait; doubles each retry
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 120.0   # a server asking for longer than this is not waited for
    jitter: float = 0.25            # +- fraction of the wait, so parallel runs do not align


class Transient(Exception):
    """Raised by an attempt that may succeed if repeated; ``retry_after_s`` from the server."""

    def __init__(self, reason: str, retry_after_s: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    raw_ms = lower.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = lower.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def call_with_retries(attempt: Callable[[], T], policy: RetryPolicy, *, what: str,
                      sleep: Callable[[float], None] = time.sleep) -> tuple[T, int]:
    """Run ``attempt`` until it returns, retrying on ``Transient``; return (result, attempts).

    Any other exception propagates at once (not retried). After the last retry, raise
    ``LLMUnavailable`` naming the last reason.
    """
    last = ""
    for n in range(policy.max_retries + 1):
        try:
            return attempt(), n + 1
        except Transient as exc:
            last = exc.reason
            if n == policy.max_retries:
                break
            if exc.retry_after_s is not None:
                if exc.retry_after_s > policy.max_retry_after_s:
                    raise LLMUnavailable(
                        f"{what}: the server asks to wait {exc.retry_after_s:.0f} s ({exc.reason})",
                        hint=f"more than the {policy.max_retry_after_s:.0f} s allowed; try later "
                             "or lower the request rate") from None
                wait = exc.retry_after_s
            else:
                wait = min(policy.max_backoff_s, policy.backoff_s * (2 ** n))
                wait *= 1.0 + random.uniform(-policy.jitter, policy.jitter)
            log.warning("%s: %s; retry %d/%d in %.2f s", what, exc.reason, n + 1,
                        policy.max_retries, wait)
            sleep(wait)
    raise LLMUnavailable(f"{what}: failed after {policy.max_retries + 1} attempts: {last}",
                         hint="check that the server is up and the base URL is right, or raise "
                              "llm_max_retries / llm_timeout_s")
