"""What every transform is: a name, ``applies`` (with a reason when not) and ``apply``.

A transform is a pure function of the source text and its parameters: it never imports or runs
the file. ``applies(analysis, **params)`` answers from the static analysis alone, so that a
proposer can screen many candidates cheaply; ``apply(source, analysis, **params)`` rewrites with
libcst and raises ``TransformError`` (carrying the same reason) when it cannot.
"""

from __future__ import annotations

import ast
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from ..analyze import KernelInfo, LaunchSite, SourceAnalysis, analyze_source
from ..errors import TransformError
from ..model import content_hash

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Applicability:
    """Whether a transform applies, why not (``reason``), and what it would touch."""

    ok: bool
    reason: str = ""
    targets: tuple[str, ...] = ()    # e.g. ("kernel add_kernel", "site 0")

    def __bool__(self) -> bool:
        return self.ok

    @classmethod
    def yes(cls, targets: tuple[str, ...] | list[str], reason: str = "") -> "Applicability":
        return cls(True, reason, tuple(targets))

    @classmethod
    def no(cls, reason: str) -> "Applicability":
        return cls(False, reason)


def short(text: str, limit: int = 60) -> str:
    """One line of at most ``limit`` characters, for reasons that quote source."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def char_index(lines: list[str], line: int, byte_col: int) -> int:
    """The index in ``"".join(lines)`` of a 1-based line and a UTF-8 byte column, as ``ast``
    gives node positions (a comment with non-ASCII text before a node shifts the two apart)."""
    before = sum(len(x) for x in lines[:line - 1])
    return before + len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8"))


def site_label(site: LaunchSite) -> str:
    """``site 3 (kern)``, or ``site 3 (kern, through fx)`` for a launch through an alias."""
    through = f", through {site.alias}" if site.alias is not None else ""
    return f"site {site.index} ({site.kernel}{through})"


def alias_refusal(site: LaunchSite, what: str) -> str | None:
    """Why ``what`` cannot be written at ``site`` when it launches through a local alias that may
    also be another kernel (``fx = a if c else b``; ``fx[grid](...)``): the call is shared, so a
    per-kernel change made there would reach the other kernel too. None for a direct launch."""
    if not site.alias_partners:
        return None
    return f"{site_label(site)}: `{site.alias}` may also be {', '.join(site.alias_partners)}, " \
           f"and {what} at that call would change it too"


def candidate_kernels(analysis: SourceAnalysis, kernel: str | None) -> list[KernelInfo]:
    """The kernels a launch-rewriting transform looks at: ``kernel`` if named, else every kernel
    this file launches."""
    if kernel is not None:
        return [k for k in analysis.kernels if k.name == kernel]
    return [k for k in analysis.kernels if analysis.sites_of(k.name)]


def first_no(reasons: list[str], what: str) -> Applicability:
    """A refusal that lists why each candidate target was rejected."""
    if not reasons:
        return Applicability.no(f"no {what} in this source")
    shown = "; ".join(reasons[:4]) + (f"; (+{len(reasons) - 4} more)" if len(reasons) > 4 else "")
    return Applicability.no(shown)


class Transform(ABC):
    """Base class of the source transforms; subclasses set the class attributes."""

    name: ClassVar[str]
    summary: ClassVar[str]
    preserves_semantics: ClassVar[bool] = True     # same values, only speed may change
    param_names: ClassVar[tuple[str, ...]] = ()
    example_params: ClassVar[Mapping[str, Any]] = {}   # representative values (coverage runs)
    no_example_reason: ClassVar[str] = "no parameters to try for this source"

    def examples(self, analysis: SourceAnalysis) -> list[dict[str, Any]]:
        """Representative parameter sets for this source (coverage runs, smoke tests); the
        default is ``example_params``. Transforms whose parameters name things in the source
        (a constexpr) derive them from the analysis, and may find none (``no_example_reason``)."""
        return [dict(self.example_params)]

    def applies(self, analysis: SourceAnalysis, **params: Any) -> Applicability:
        unknown = set(params) - set(self.param_names)
        if unknown:
            return Applicability.no(f"unknown parameter(s) {sorted(unknown)} for {self.name}; "
                                    f"known: {list(self.param_names)}")
        return self._applies(analysis, **params)

    def apply(self, source: str, analysis: SourceAnalysis | None = None, **params: Any) -> str:
        """The rewritten source; raises TransformError with the reason when it does not apply."""
        if analysis is None:
            analysis = analyze_source(source)
        elif analysis.source_hash != content_hash(source):
            raise TransformError(f"{self.name}: the analysis is of another source",
                                 hint="pass analyze_source(source) of this very source")
        verdict = self.applies(analysis, **params)
        if not verdict.ok:
            raise TransformError(f"{self.name}: {verdict.reason}")
        out = self._apply(source, analysis, **params)
        try:
            ast.parse(out)
        except SyntaxError as exc:      # a bug in the transform, never the user's fault
            raise TransformError(f"{self.name} produced invalid Python ({exc.msg} at line "
                                 f"{exc.lineno})", hint="report this with the source file")
        if out == source:
            raise TransformError(f"{self.name}: nothing to change")
        log.debug("%s applied to %s", self.name, ", ".join(verdict.targets))
        return out

    @abstractmethod
    def _applies(self, analysis: SourceAnalysis, **params: Any) -> Applicability:
        ...

    @abstractmethod
    def _apply(self, source: str, analysis: SourceAnalysis, **params: Any) -> str:
        ...
