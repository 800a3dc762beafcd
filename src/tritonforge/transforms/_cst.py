"""libcst helpers shared by the transforms: find nodes again, edit call arguments, splice kernels.

The analysis (``tritonforge.analyze``) reads the file with ``ast``; the transforms edit it with
libcst, which keeps every comment and the user's layout. Nodes are found again without comparing
positions across the two parsers: launch sites by their order in the file (both list
``kernel[grid](...)`` calls in source order, and the grid text is checked; an alias call
``fx[grid](...)`` is the analysis's consecutive sites of ``fx``'s kernels), functions by name.
Rewrites inside one kernel parse just that kernel's text, where positions are cheap to compute,
and splice it back by line range.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Callable

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ..analyze import KernelInfo, LaunchSite, SourceAnalysis
from ..errors import TransformError

Edit = Callable[[cst.CSTNode], "cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel"]

_EMPTY = cst.Module(body=[])
_WS = re.compile(r"\s+")


def code(node: cst.CSTNode) -> str:
    return _EMPTY.code_for_node(node)


def same_code(a: str, b: str) -> bool:
    return _WS.sub("", a) == _WS.sub("", b)


class RenameNames(cst.CSTTransformer):
    """Rename variables through ``new_name(name) -> str | None`` (None: keep it); attribute
    names (``x.name``) and keyword names (``f(name=...)``) are not variables and keep theirs."""

    def new_name(self, name: str) -> str | None:
        raise NotImplementedError

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        new = self.new_name(updated.value)
        return updated if new is None else updated.with_changes(value=new)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def dotted(node: cst.CSTNode | None) -> str:
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return ""


class Replacer(cst.CSTTransformer):
    """Applies edits to nodes chosen beforehand (by identity) in one pass."""

    def __init__(self, edits: dict[int, Edit]):
        super().__init__()
        self.edits = edits
        self.done: set[int] = set()

    def on_leave(self, original_node, updated_node):  # noqa: D102 (libcst hook)
        fn = self.edits.get(id(original_node))
        if fn is None:
            return updated_node
        self.done.add(id(original_node))
        return fn(updated_node)


def replace(module: cst.Module, edits: dict[int, Edit]) -> cst.Module:
    r = Replacer(edits)
    out = module.visit(r)
    missing = set(edits) - r.done
    if missing:
        raise TransformError(f"internal: {len(missing)} planned edits found no node",
                             hint="report this with the source file")
    return out


# ---------------------------------------------------------------- launch sites


def _launch_kernel(call: cst.Call, kernels: set[str]) -> str | None:
    func = call.func
    if not isinstance(func, cst.Subscript):
        return None
    target = func.value
    if isinstance(target, cst.Name) and target.value in kernels:
        return target.value
    if isinstance(target, cst.Attribute) and target.attr.value in kernels:
        return target.attr.value
    return None


class _LaunchCollector(cst.CSTVisitor):
    """Launch calls in source order: ``kernel[grid](...)``, and ``name[grid](...)`` where the
    analysis resolved ``name`` in that function as an alias of kernels (``aliases``: qualified
    function -> alias names), recorded as ``(call, name, is_alias)``."""

    def __init__(self, kernels: set[str], aliases: dict[str | None, set[str]]):
        super().__init__()
        self.kernels = kernels
        self.aliases = aliases
        self.qual: list[str] = []
        self.calls: list[tuple[cst.Call, str, bool]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.qual.append(node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.qual.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.qual.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.qual.pop()

    def visit_Call(self, node: cst.Call) -> None:
        name = _launch_kernel(node, self.kernels)
        if name is not None:
            self.calls.append((node, name, False))
            return
        func = node.func
        if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Name) \
                and func.value.value in self.aliases.get(".".join(self.qual) or None, ()):
            self.calls.append((node, func.value.value, True))


def grid_node(call: cst.Call) -> cst.BaseExpression:
    sub = call.func
    assert isinstance(sub, cst.Subscript)
    elems = sub.slice
    if len(elems) == 1 and isinstance(elems[0].slice, cst.Index):
        return elems[0].slice.value
    raise TransformError("a launch subscript with several elements is not supported")


def grid_text(call: cst.Call) -> str:
    sub = call.func
    assert isinstance(sub, cst.Subscript)
    return "".join(code(e) for e in sub.slice)


def launch_calls(module: cst.Module, analysis: SourceAnalysis) -> dict[int, cst.Call]:
    """The libcst Call node of every launch site, by site index; checks they line up. The sites
    of one alias call (one per kernel the alias may be) all map to that call."""
    sites = analysis.launch_sites
    aliases: dict[str | None, set[str]] = {}
    for s in sites:
        if s.alias is not None:
            aliases.setdefault(s.function, set()).add(s.alias)
    collector = _LaunchCollector({k.name for k in analysis.kernels}, aliases)
    module.visit(collector)
    groups: list[tuple[cst.Call, str, list[LaunchSite]]] = []
    at = 0
    for call, name, is_alias in collector.calls:
        n = max(len(sites[at].alias_kernels), 1) if is_alias and at < len(sites) else 1
        groups.append((call, name, list(sites[at:at + n])))
        at += n
    if at != len(sites) or any(not group for _, _, group in groups):
        raise TransformError(
            f"found {len(collector.calls)} launch calls but the analysis lists {len(sites)} "
            "sites that do not line up with them",
            hint="the analysis belongs to another version of the source: analyze it again")
    out = {}
    for call, name, group in groups:
        for site in group:
            if name != (site.alias or site.kernel) \
                    or not same_code(grid_text(call), site.grid.source):
                raise TransformError(
                    f"launch site {site.index} ({site.alias or site.kernel}[{site.grid.source}]) "
                    f"does not match the source ({name}[{grid_text(call)}])",
                    hint="the analysis belongs to another version of the source: analyze it "
                         "again")
            out[site.index] = call
    return out


# ---------------------------------------------------------------- call arguments


def keyword_of(arg: cst.Arg) -> str | None:
    return arg.keyword.value if arg.keyword is not None else None


def _separator(args: list[cst.Arg]) -> cst.Comma:
    """The comma style between arguments: that of the closest separator in the call itself."""
    for a in reversed(args[:-1]):
        if isinstance(a.comma, cst.Comma):
            return clean_comma(a.comma)
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def clean_comma(comma: cst.Comma) -> cst.Comma:
    """A copy of a separator without the comment or blank lines that may follow it."""
    ws = comma.whitespace_after
    if isinstance(ws, cst.ParenthesizedWhitespace):
        ws = ws.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
        return comma.with_changes(whitespace_after=ws)
    return comma


def kw_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(value=value, keyword=cst.Name(name),
                   equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                         whitespace_after=cst.SimpleWhitespace("")))


def set_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with keyword ``name=value`` set (replaced in place, or appended)."""
    args = list(call.args)
    for i, a in enumerate(args):
        if keyword_of(a) == name:
            args[i] = a.with_changes(value=value)
            return call.with_changes(args=args)
    return call.with_changes(args=append_arg(args, kw_arg(name, value)))


def append_arg(args: list[cst.Arg], new: cst.Arg) -> list[cst.Arg]:
    """``args`` + ``new``, laid out like the call: same separators, trailing comma kept."""
    if not args:
        return [new]
    last = args[-1]
    sep = _separator(args) if len(args) > 1 else cst.Comma(
        whitespace_after=cst.SimpleWhitespace(" "))
    if isinstance(last.comma, cst.Comma):          # trailing comma: keep the style
        return args[:-1] + [last.with_changes(comma=sep), new.with_changes(comma=last.comma)]
    # the space before ")" belongs to the last argument: hand it on to the new last one
    return args[:-1] + [last.with_changes(comma=sep, whitespace_after_arg=cst.SimpleWhitespace("")),
                        new.with_changes(whitespace_after_arg=last.whitespace_after_arg)]


def remove_args(args: list[cst.Arg], drop: Callable[[int, cst.Arg], bool]) -> list[cst.Arg]:
    """``args`` without the dropped ones, keeping separators and a trailing comma consistent."""
    trailing = args[-1].comma if args else cst.MaybeSentinel.DEFAULT
    kept = [a for i, a in enumerate(args) if not drop(i, a)]
    if kept and len(kept) != len(args):
        kept[-1] = kept[-1].with_changes(comma=trailing)
    return kept


def int_node(value: int) -> cst.BaseExpression:
    return cst.Integer(str(value)) if value >= 0 else cst.parse_expression(str(value))


def literal_node(value: object) -> cst.BaseExpression:
    if isinstance(value, str) and '"' not in value and "\\" not in value:
        return cst.SimpleString(f'"{value}"')
    return cst.parse_expression(repr(value))


# ---------------------------------------------------------------- functions and kernels


def find_function(module: cst.Module, qualname: str | None) -> cst.FunctionDef | None:
    """The function named by a dotted qualified name such as ``"Softmax.forward"``."""
    if not qualname:
        return None
    parts = qualname.split(".")
    body: list = list(module.body)
    node = None
    for part in parts:
        node = None
        for stmt in body:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.name.value == part:
                node = stmt
                break
        if node is None:
            return None
        body = list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else []
    return node if isinstance(node, cst.FunctionDef) else None


def find_kernel(module: cst.Module, name: str) -> cst.FunctionDef:
    found: list[cst.FunctionDef] = []

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            if node.name.value == name and not found:
                found.append(node)

    module.visit(V())
    if not found:
        raise TransformError(f"kernel {name!r} not found in the source")
    return found[0]


@dataclass(frozen=True)
class KernelText:
    """The lines of one kernel (decorators included), dedented to parse on their own."""

    first: int          # 0-based index of the first line in the source
    last: int           # 0-based index one past the last line
    indent: str
    text: str

    def file_line(self, line: int) -> int:
        return line + self.first

    def local_pos(self, line: int, col: int) -> tuple[int, int]:
        """A file position (1-based line, 0-based col) in the kernel text."""
        return line - self.first, col - len(self.indent)


def kernel_text(source: str, kernel: KernelInfo) -> KernelText:
    lines = source.splitlines(keepends=True)
    first, last = kernel.span.line - 1, kernel.span.end_line
    chunk = "".join(lines[first:last])
    head = lines[first]
    indent = head[:len(head) - len(head.lstrip())]
    dedented = textwrap.dedent(chunk) if indent else chunk
    if indent and any(ln.strip() and not ln.startswith(indent) for ln in chunk.splitlines()):
        raise TransformError(f"kernel {kernel.name} has lines indented less than its def",
                             hint="re-indent the kernel")
    if not dedented.endswith("\n"):
        dedented += "\n"
    return KernelText(first, last, indent, dedented)


def splice(source: str, kt: KernelText, new_text: str) -> str:
    lines = source.splitlines(keepends=True)
    body = new_text if not kt.indent else textwrap.indent(new_text, kt.indent)
    if kt.last >= len(lines) and not source.endswith("\n"):
        body = body.rstrip("\n")
    return "".join(lines[:kt.first]) + body + "".join(lines[kt.last:])


class PositionEditor(cst.CSTTransformer):
    """Edits nodes of given types found at given (line, column) positions of a small module."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, edits: dict[tuple[type, int, int], Edit]):
        super().__init__()
        self.edits = edits
        self.types = tuple({t for t, _, _ in edits})
        self.done: set[tuple[type, int, int]] = set()

    def on_leave(self, original_node, updated_node):  # noqa: D102 (libcst hook)
        if not isinstance(original_node, self.types):
            return updated_node
        pos = self.get_metadata(PositionProvider, original_node).start
        col = pos.column
        for par in getattr(original_node, "lpar", ()):   # ast positions exclude parentheses
            ws = par.whitespace_after
            col += 1 + (len(ws.value) if isinstance(ws, cst.SimpleWhitespace) else 0)
        key = (type(original_node), pos.line, col)
        fn = self.edits.get(key)
        if fn is None or key in self.done:
            return updated_node
        self.done.add(key)
        return fn(updated_node)


def edit_at(text: str, edits: dict[tuple[type, int, int], Edit]) -> str:
    """Apply position-keyed edits to ``text``; every edit must find its node."""
    module = cst.parse_module(text)
    editor = PositionEditor(edits)
    out = MetadataWrapper(module, unsafe_skip_copy=True).visit(editor)
    missing = set(edits) - editor.done
    if missing:
        raise TransformError(f"internal: no node at {sorted((l, c) for _, l, c in missing)}",
                             hint="report this with the source file")
    return out.code


def site_selection(analysis: SourceAnalysis, site: int | None,
                   kernel: str | None) -> tuple[LaunchSite, ...]:
    if site is not None:
        return tuple(s for s in analysis.launch_sites if s.index == site)
    if kernel is not None:
        return analysis.sites_of(kernel)
    return analysis.launch_sites


def edit_kernel(source: str, kernel: KernelInfo,
                edits: dict[tuple[type, int, int], Edit],
                whole: Edit | None = None) -> str:
    """Apply edits keyed by *file* positions inside one kernel, then ``whole`` to its
    FunctionDef, and splice the kernel back."""
    kt = kernel_text(source, kernel)
    local = {(t, *kt.local_pos(line, col)): fn for (t, line, col), fn in edits.items()}
    text = edit_at(kt.text, local) if local else kt.text
    if whole is not None:
        module = cst.parse_module(text)
        fn = next(s for s in module.body if isinstance(s, cst.FunctionDef))
        text = replace(module, {id(fn): whole}).code
    return splice(source, kt, text)


def append_param(fn: cst.FunctionDef, param: cst.Param, before_defaults: bool = False
                 ) -> tuple[cst.FunctionDef, int]:
    """``fn`` with ``param`` added to its positional parameters (at the end, or before the first
    one with a default) in the signature's own layout; also returns the index it took."""
    params = list(fn.params.params)
    at = len(params)
    if before_defaults:
        at = next((i for i, p in enumerate(params) if p.default is not None), len(params))
    if at == len(params):
        as_args = [cst.Arg(value=cst.Name(p.name.value), comma=p.comma,
                           whitespace_after_arg=cst.SimpleWhitespace("")) for p in params]
        merged = append_arg(as_args, cst.Arg(value=cst.Name(param.name.value)))
        new = [p.with_changes(comma=a.comma) for p, a in zip(params, merged)]
        # the space before ")" (a newline in a one-per-line signature) follows the new last one
        tail = params[-1].whitespace_after_param if params else cst.SimpleWhitespace("")
        if new:
            new[-1] = new[-1].with_changes(whitespace_after_param=cst.SimpleWhitespace(""))
        new.append(param.with_changes(comma=merged[-1].comma, whitespace_after_param=tail))
    else:
        sep = params[at - 1].comma if at > 0 and isinstance(params[at - 1].comma, cst.Comma) \
            else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        new = params[:at] + [param.with_changes(comma=sep)] + params[at:]
    return fn.with_changes(params=fn.params.with_changes(params=new)), at
