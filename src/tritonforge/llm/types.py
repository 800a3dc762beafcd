"""The values every LLM client speaks: messages, replies, token usage, and the client protocol.

Kept apart from the clients so that the proposer, the transcript and the tests share them without
importing any HTTP library (the GPU image has no ``openai`` package).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Message:
    """One chat message. ``role`` is system, user or assistant."""

    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"message role must be one of {ROLES}, not {self.role!r}")


@dataclass(frozen=True)
class Usage:
    """Tokens one request consumed, as the server reported them (0 when it did not say)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False      # the server reported no usage: counted from text lengths

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.prompt_tokens + other.prompt_tokens,
                     self.completion_tokens + other.completion_tokens,
                     self.estimated or other.estimated)


def estimate_tokens(text: str) -> int:
    """A deliberately high token count for ``text`` (3 characters a token; code runs ~3.5-4).

    Used to check the budget before a request and when a server reports no usage.
    """
    return (len(text) + 2) // 3


@dataclass(frozen=True)
class ChatReply:
    """What a chat request returned: the text, its usage and how the request went."""

    text: str
    usage: Usage
    model: str = ""
    finish_reason: str = ""      # "stop", "length" (cut off at max_tokens), ...
    latency_s: float = 0.0       # wall time of the successful attempt
    attempts: int = 1            # HTTP attempts, retries included
    replayed: bool = False       # served from a transcript, not by a model


@runtime_checkable
class ChatClient(Protocol):
    """Anything that answers a chat: OpenAI-compatible HTTP, Anthropic, a transcript replay.

    ``model`` names what answers (used in candidate origins such as ``llm:<model>``).
    """

    model: str

    def complete(self, messages: Sequence[Message], *, max_tokens: int,
                 temperature: float) -> ChatReply:
        """Send ``messages`` and return the reply; raise ``LLMError`` subclasses on failure."""
        ...


def request_key(messages: Sequence[Message]) -> str:
    """Content address of a request: sha256 over the roles and contents of its messages.

    Only the messages count (not max_tokens or temperature) so that a replay still matches when
    the token budget trims max_tokens differently.
    """
    canonical = json.dumps([[m.role, m.content] for m in messages], ensure_ascii=False,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:24]
