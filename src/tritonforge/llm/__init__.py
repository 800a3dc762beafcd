"""The optional LLM proposer: any chat model behind one small client interface.

Public names (the rest is private)::

    client.ChatClient, OpenAIChatClient, AnthropicChatClient, RecordingClient, ReplayClient
    proposer.LLMProposer          implements search.proposer.Proposer
    parse.extract_source          reply text -> ParsedReply (ok + source, or a reason)
    usage.TokenBudget, UsageRecord, Pricing
    testgen.generate_spec         ask for a TOML case spec
    factory.build_proposer        everything above, from Settings

Importing this package never imports ``openai`` (the GPU image lacks it): the OpenAI client
imports it when it is built.
"""

from .client import (
    AnthropicChatClient,
    ChatClient,
    ChatReply,
    Message,
    OpenAIChatClient,
    RecordingClient,
    ReplayClient,
    Usage,
)
from .errors import LLMConfigError, LLMError, LLMUnavailable, ReplayMiss
from .factory import budget_from_settings, build_proposer
from .parse import ParsedReply, extract_source
from .proposer import LLMProposer, Rejection
from .testgen import TestgenResult, generate_spec
from .usage import Pricing, TokenBudget, UsageRecord

__all__ = [
    "AnthropicChatClient", "ChatClient", "ChatReply", "LLMConfigError", "LLMError",
    "LLMProposer", "LLMUnavailable", "Message", "OpenAIChatClient", "ParsedReply", "Pricing",
    "RecordingClient", "Rejection", "ReplayClient", "ReplayMiss", "TestgenResult",
    "TokenBudget", "Usage", "UsageRecord", "budget_from_settings", "build_proposer",
    "extract_source", "generate_spec",
]
