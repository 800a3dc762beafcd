"""The chat-client facade: the ``ChatClient`` protocol and every implementation, in one place.

    OpenAIChatClient   any OpenAI-compatible /chat/completions endpoint (hosted, vLLM, SGLang,
                       llama.cpp, Ollama); needs the ``openai`` package, imported lazily
    AnthropicChatClient  Anthropic's Messages API over urllib (optional)
    RecordingClient    wraps a client; appends every exchange to a JSONL transcript
    ReplayClient       serves a transcript's replies again; no model, fails on unseen requests

``build_client(settings, run_dir)`` picks one from the settings (see docs/LLM.md).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from ..config import Settings
from .anthropic_client import AnthropicChatClient
from .errors import LLMConfigError
from .openai_client import OpenAIChatClient
from .transcript import RecordingClient, ReplayClient
from .types import ChatClient, ChatReply, Message, Usage, request_key

__all__ = ["AnthropicChatClient", "ChatClient", "ChatReply", "Message", "OpenAIChatClient",
           "RecordingClient", "ReplayClient", "Usage", "build_client", "llm_enabled",
           "request_key", "transcript_path"]

PROVIDERS = ("openai", "anthropic")


def transcript_path(run_dir: str | Path) -> Path:
    """Where a run keeps its prompts and replies: ``<run_dir>/llm/transcript.jsonl``."""
    return Path(run_dir) / "llm" / "transcript.jsonl"


def llm_enabled(settings: Settings) -> bool:
    """The LLM proposer is optional: on when a model is named or a replay is asked for."""
    return bool(settings.llm_model or settings.llm_replay)


def build_client(settings: Settings, run_dir: str | Path | None = None,
                 env: Mapping[str, str] | None = None) -> ChatClient:
    """The client the settings describe, recording into ``run_dir`` when one is given.

    ``llm_replay`` (a transcript path) wins: the run is answered from it without any model.
    The API key is read from the environment variable named by ``llm_api_key_env``.
    """
    env = os.environ if env is None else env
    if settings.llm_replay:
        return ReplayClient(settings.llm_replay)
    provider = settings.llm_provider.lower()
    if provider not in PROVIDERS:
        raise LLMConfigError(f"unknown llm_provider {settings.llm_provider!r}",
                             hint="use 'openai' (any OpenAI-compatible server) or 'anthropic'")
    api_key = env.get(settings.llm_api_key_env, "") if settings.llm_api_key_env else ""
    cls = OpenAIChatClient if provider == "openai" else AnthropicChatClient
    client: ChatClient = cls(settings.llm_base_url, settings.llm_model, api_key or None,
                             timeout_s=settings.llm_timeout_s,
                             max_retries=settings.llm_max_retries)
    if run_dir is not None:
        client = RecordingClient(client, transcript_path(run_dir))
    return client
