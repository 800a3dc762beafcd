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
    return bool(settings.llm.model or settings.llm.replay)


def build_client(settings: Settings, run_dir: str | Path | None = None,
                 env: Mapping[str, str] | None = None) -> ChatClient:
    """The client the settings describe, recording into ``run_dir`` when one is given.

    ``llm_replay`` (a transcript path) wins: the run is answered from it without any model.
    The API key is read from the environment variable named by ``llm_api_key_env``.
    """
    env = os.environ if env is None else env
    llm = settings.llm
    if llm.replay:
        return ReplayClient(llm.replay)
    provider = llm.provider.lower()
    if provider not in PROVIDERS:
        raise LLMConfigError(f"unknown llm_provider {llm.provider!r}",
                             hint="use 'openai' (any OpenAI-compatible server) or 'anthropic'")
    api_key = env.get(llm.api_key_env, "") if llm.api_key_env else ""
    cls = OpenAIChatClient if provider == "openai" else AnthropicChatClient
    client: ChatClient = cls(llm.base_url, llm.model, api_key or None,
                             timeout_s=llm.timeout_s, max_retries=llm.max_retries)
    if run_dir is not None:
        client = RecordingClient(client, transcript_path(run_dir))
    return client
