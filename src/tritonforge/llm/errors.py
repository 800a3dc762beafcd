"""Errors of the LLM clients, placed in TritonForge's one exception tree.

    LLMError (TritonForgeError)          catch this to catch any of them
    ├── LLMConfigError (ConfigError)     no key, bad URL, unknown model, 4xx the server will not retry
    ├── LLMUnavailable (EnvironmentProblem)  timeouts, connection errors, 429/5xx after all retries
    └── ReplayMiss (StoreError)          replay asked for a request the transcript does not hold

A candidate the model writes that does not parse or is refused by the policy is not an error: it
is data (a rejection with its reason), and the repair loop sends the reason back.
"""

from __future__ import annotations

from ..errors import ConfigError, EnvironmentProblem, StoreError, TritonForgeError


class LLMError(TritonForgeError):
    """Base of the errors raised by LLM clients."""


class LLMConfigError(LLMError, ConfigError):
    """The request cannot succeed as configured (key, URL, model name, request shape)."""


class LLMUnavailable(LLMError, EnvironmentProblem):
    """The endpoint did not answer usefully within the retries (timeouts, 429, 5xx, refused)."""


class ReplayMiss(LLMError, StoreError):
    """A replayed run made a request that the recorded transcript does not contain."""
