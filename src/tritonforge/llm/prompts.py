"""Render the prompt templates (``src/tritonforge/prompts/*.j2``) into chat messages.

Prompts are files, not strings in code, so they can be read, diffed and overridden: a
``templates_dir`` given by the user is searched first, the packaged directory second. Rendering is
deterministic (no timestamps, stable ordering), which replay relies on.
"""

from __future__ import annotations

import logging
from importlib.metadata import version
from pathlib import Path
from typing import Sequence

from ..errors import ConfigError
from ..model import ProposalContext, RepairRequest
from .types import Message

log = logging.getLogger(__name__)

DEFAULT_TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "prompts"
MAX_ERROR_CHARS = 6000     # long tracebacks: keep the head and the tail


def clip_error(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """Shorten an error text to ``limit`` characters, keeping its start and its end."""
    text = text.strip()
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... ({len(text) - limit} characters cut) ...\n{text[-half:]}"


def _triton_version() -> str:
    try:
        return version("triton")
    except Exception:     # not installed here (a CPU-only machine writing prompts)
        return "3.x"


class PromptSet:
    """The prompts of one run, rendered from jinja2 templates."""

    def __init__(self, templates_dir: str | Path | None = None, *,
                 triton_version: str | None = None):
        try:
            import jinja2   # optional: the GPU image and a plain install have none
        except ImportError:
            raise ConfigError("the LLM prompts need the 'jinja2' package",
                              hint="pip install jinja2") from None
        search = [str(DEFAULT_TEMPLATES_DIR)]
        if templates_dir is not None:
            if not Path(templates_dir).is_dir():
                raise ConfigError(f"prompt templates directory {templates_dir} does not exist",
                                  hint="point llm_templates_dir at a folder of .j2 files, or "
                                       "leave it empty for the packaged templates")
            search.insert(0, str(templates_dir))
        self.templates_dir = Path(templates_dir) if templates_dir else DEFAULT_TEMPLATES_DIR
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(search), undefined=jinja2.StrictUndefined,
            trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
            autoescape=False)
        self.triton_version = triton_version or _triton_version()

    def render(self, name: str, **values: object) -> str:
        text = self._env.get_template(name).render(**values)
        # Collapse runs of blank lines left by optional sections, but never inside a fenced
        # block: the kernel source must reach the model exactly as it is.
        lines: list[str] = []
        blank, fenced = 0, False
        for line in text.splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
            if fenced:
                lines.append(line)
                blank = 0
                continue
            blank = blank + 1 if not line.strip() else 0
            if blank <= 1:
                lines.append(line.rstrip())
        return "\n".join(lines).strip() + "\n"

    def system(self, entries: Sequence[str]) -> Message:
        contract = self.render("output_contract.j2", entries=list(entries))
        return Message("system", self.render("system.j2", entries=list(entries),
                                             contract=contract,
                                             triton_version=self.triton_version))

    def propose(self, ctx: ProposalContext, *, index: int = 1, count: int = 1,
                earlier: Sequence[str] = ()) -> list[Message]:
        """System + user messages asking for proposal ``index`` of ``count`` this round."""
        return [self.system(ctx.task.entries),
                Message("user", self.render("propose.j2", ctx=ctx, index=index, count=count,
                                            earlier=list(earlier)))]

    def repair(self, req: RepairRequest) -> list[Message]:
        """System + user messages sending back a failed candidate with its error."""
        return [self.system(req.context.task.entries),
                Message("user", self.render("repair.j2", req=req, ctx=req.context,
                                            error=clip_error(req.error)))]

    def rejected(self, reason: str, *, kind: str, entries: Sequence[str]) -> Message:
        """The follow-up after a reply refused by the parser (kind "format") or policy."""
        return Message("user", self.render("rejected.j2", reason=reason, kind=kind,
                                           entries=list(entries)))

    def testgen(self, source: str, entries: Sequence[str]) -> list[Message]:
        return [Message("system", self.render("testgen_system.j2")),
                Message("user", self.render("testgen.j2", source=source,
                                            entries=list(entries)))]

    def testgen_rejected(self, reason: str) -> Message:
        return Message("user", self.render("testgen_rejected.j2", reason=reason))
