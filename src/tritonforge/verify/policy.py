"""The static policy a candidate's source must pass before it is ever imported.

A candidate (from the rule engine or an LLM) is untrusted code that will run in the worker beside
the timer that judges it. Read with ``ast`` only, it must not: import beyond an allowlist (by
default what Triton kernel files use; callers add the original's own imports), start processes or
open sockets, evaluate code (eval/exec/compile/__import__), write files outside the run directory,
replace attributes of anything it imported (``time.perf_counter = ...``,
``setattr(torch.cuda, "synchronize", f)``, ``os.environ[...] = ...``), change global numeric
settings, or reach interpreter internals (``__globals__``, frames). Each refusal names its line.

A candidate that can tell it is being verified can compute the right thing only then. So it
must also not reach what would tell it (rules ``private``, ``harness``, ``env``, ``clock``,
``random``, ``introspection``): torch's or triton's private parts (``torch._C``, whose
``_DisableTorchDispatch`` hides ops from the recorder, ``torch.utils._python_dispatch``), dispatch
and function modes (``torch.overrides``), the profiler, Triton's launch hooks and interpreter,
``os.environ``, clocks (a bomb that goes off N seconds after import; the GPU's, read in a kernel,
by inline PTX or by a CUDA event's ``elapsed_time``, tells the timer's back-to-back calls from the
verifier's; a log record's timestamp and the benchmark timers are clocks too), the GPU's load
(power, temperature, clock rate), randomness outside torch's seeded generators (a bomb on 1 call
in 256), threads (work the timer does not wait for), and the harness itself (``sys._getframe``, ``sys.modules``, ``inspect``, ``gc``, ``tritonforge``). What the
original itself does is tolerated (``check_source(..., original=...)``). Nor may it register
kernels for torch's own ops (``torch.library``, an op overload's ``py_impl``): one registered for
``aten::abs`` changes the verifier's comparisons in the same process (verify.integrity reports
and takes back what gets past this wall).

This is a first wall, not a sandbox: the dynamic guards (verify.guards) check behaviour at run time.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

DEFAULT_ALLOWED_IMPORTS = frozenset({
    "torch", "triton", "numpy", "math", "typing", "typing_extensions", "functools", "itertools",
    "collections", "dataclasses", "enum", "abc", "operator", "numbers", "__future__", "warnings",
    "logging", "copy", "contextlib", "time", "einops",
})

# Never allowed, whatever the original imports.
FORBIDDEN_MODULES = frozenset({
    "subprocess", "socket", "ctypes", "cffi", "multiprocessing", "threading", "_thread", "pty",
    "signal", "importlib", "builtins", "marshal", "pickle", "shutil", "http", "urllib",
    "requests", "asyncio", "code", "codeop", "runpy", "tempfile", "webbrowser",
    "torch.utils.cpp_extension", "torch.multiprocessing", "torch.distributed",
    "torch.utils.dlpack", "triton.runtime.build", "inspect", "gc", "tritonforge", "traceback",
    "concurrent", "queue", "sched", "faulthandler", "tracemalloc",
})

# Paths (after alias resolution) that would let a candidate notice the verifier, or change its
# behaviour by time or chance: prefix -> (rule, what it is).
_HARNESS_PATHS = {
    "torch.overrides": ("harness", "torch function modes"),
    "torch.profiler": ("harness", "the profiler"),
    "torch.autograd.profiler": ("harness", "the profiler"),
    "torch.utils._python_dispatch": ("harness", "dispatch modes"),
    "torch.utils.hooks": ("harness", "hooks"),
    "triton.knobs.runtime.launch_enter_hook": ("harness", "Triton's launch hooks"),
    "triton.knobs.runtime.launch_exit_hook": ("harness", "Triton's launch hooks"),
    "triton.knobs.runtime.jit_cache_hook": ("harness", "Triton's compile hooks"),
    "triton.knobs.runtime.jit_post_compile_hook": ("harness", "Triton's compile hooks"),
    "triton.runtime.interpreter": ("harness", "Triton's interpreter"),
    "triton.runtime.cache": ("harness", "Triton's cache, whose place names the run"),
    "triton.knobs.cache": ("harness", "Triton's cache, whose place names the run"),
    # a kernel that reads the GPU's clock can tell the timer's back-to-back calls from the
    # verifier's spaced ones (the time since its last call, kept in a tensor its own stores
    # write, which no version counter sees) and be wrong only while timed; inline PTX reads
    # the same clocks (%globaltimer, %clock64). A red-team kernel on the CPU, 2026-11-26.
    "triton.language.extra.cuda.globaltimer": ("clock", "the GPU's clock"),
    "triton.language.extra.globaltimer": ("clock", "the GPU's clock"),
    "triton.language.inline_asm_elementwise": ("clock", "inline PTX, which reads the GPU's "
                                                        "clocks"),
    "triton.language.core.inline_asm_elementwise": ("clock", "inline PTX, which reads the GPU's "
                                                             "clocks"),
    # the allocator's state differs between the verifier's calls (its clones, poisoned
    # allocations) and the timer's (an L2 flush buffer, nothing held): a threshold on it tells
    # them apart as a clock would
    **{f"torch.cuda.{name}": ("harness", "the allocator's state") for name in (
        "memory", "memory_allocated", "max_memory_allocated", "memory_reserved",
        "max_memory_reserved", "memory_stats", "memory_stats_as_nested_dict", "memory_summary",
        "memory_snapshot", "mem_get_info")},
    # the GPU's state moves under the timer's back-to-back load (power, temperature, clocks,
    # memory traffic) and rests between the verifier's spaced calls
    **{f"torch.cuda.{name}": ("harness", "the GPU's load") for name in (
        "memory_usage", "temperature", "power_draw", "clock_rate", "device_memory_used",
        "caching_allocator_alloc", "caching_allocator_delete", "host_memory_stats")},
    "torch.cuda.list_gpu_processes": ("harness", "the GPU's processes"),
    "torch.cuda.utilization": ("harness", "the GPU's load"),
    "torch.cuda.is_current_stream_capturing": ("harness", "whether a CUDA graph is captured"),
    # the verifier reseeds torch before each of its calls, the timer does not: a generator's
    # state (or the seed it was last given) read between calls tells them apart
    **{path: ("random", "the generator's state, which the verifier reseeds") for path in (
        "torch.get_rng_state", "torch.random.get_rng_state", "torch.cuda.get_rng_state",
        "torch.cuda.get_rng_state_all", "torch.default_generator",
        "torch.cuda.default_generators")},
    **{path: ("random", "the seed the verifier last gave torch") for path in (
        "torch.initial_seed", "torch.random.initial_seed", "torch.cuda.initial_seed")},
    # reseeding from the OS's entropy: a randomness source outside the verifier's seeds
    **{path: ("random", "a seed drawn from the OS, which the verifier does not give") for path in (
        "torch.seed", "torch.random.seed", "torch.cuda.seed", "torch.cuda.seed_all",
        "torch.cuda.random.seed", "torch.cuda.random.seed_all")},
    # clocks by other names (red-team snippets on the CPU, 2026-11-28, that passed the policy
    # before): a log record's timestamp, numpy's "now", the benchmark timers
    "logging.LogRecord": ("clock", "a log record, which holds the time it was made"),
    "logging.makeLogRecord": ("clock", "a log record, which holds the time it was made"),
    "numpy.datetime64": ("clock", "a clock ('now')"),
    "torch.utils.benchmark": ("clock", "a benchmark timer"),
    "triton.testing.do_bench": ("clock", "a benchmark timer"),
    "triton.testing.do_bench_cudagraph": ("clock", "a benchmark timer"),
    # ways to run other code than this file's kernels, or to change what torch's own ops do in
    # the verifier's process (a kernel registered for an aten op replaces the op for everyone)
    "torch.library": ("monkeypatch", "registers kernels for torch's ops, the verifier's own "
                                     "comparisons included"),
    "torch.hub": ("library", "downloads and runs other code"),
    "torch.utils.data": ("process", "data loaders start worker processes"),
    "numpy.ctypeslib": ("import", "ctypes, which is forbidden in a candidate"),
    "os.environ": ("env", "the environment"),
    "os.getenv": ("env", "the environment"),
    "os.environb": ("env", "the environment"),
    "os.urandom": ("random", "a randomness source"),
    "os.getrandom": ("random", "a randomness source"),
    "os.getpid": ("random", "the process id"),
    "os.times": ("clock", "a clock"),
    "random": ("random", "a randomness source outside torch's seeded generators"),
    "secrets": ("random", "a randomness source"),
    "uuid": ("random", "a randomness source"),
    "numpy.random": ("random", "a randomness source outside torch's seeded generators"),
    "datetime": ("clock", "a clock"),
    "sys.modules": ("introspection", "the interpreter's module table"),
    "sys.argv": ("introspection", "the harness's command line"),
    "sys.gettrace": ("introspection", "the tracer"),
    "sys.getprofile": ("introspection", "the profiler hook"),
    "sys.getrefcount": ("introspection", "reference counts"),
}
# the only clock function a candidate may call (a wait, not a measurement)
_CLOCK_ALLOWED = frozenset({"time.sleep"})

# methods (no arguments) that ask a CUDA stream or event whether queued work has finished
_BUSY_QUERIES = frozenset({"query"})
# methods that read a clock whatever their receiver: a CUDA event's ``elapsed_time`` is the GPU's
# clock (the time since the last call's event tells the timer's back-to-back calls from the
# verifier's spaced ones), a log record's fields hold the host's
_CLOCK_METHODS = frozenset({"elapsed_time"})
_CLOCK_ATTRS = frozenset({"created", "msecs", "relativeCreated"})
# methods of an op overload (``torch.ops.aten.add.Tensor.py_impl``) that register a kernel for it
_OP_REGISTRATIONS = frozenset({"py_impl", "py_kernels", "register_fake", "register_kernel",
                               "register_autograd", "register_torch_dispatch"})

_EXEC_BUILTINS = {"eval", "exec", "compile", "__import__", "breakpoint", "input"}
_PROCESS_CALLS = {
    "os.system", "os.popen", "os.fork", "os.forkpty", "os.kill", "os.killpg", "os.posix_spawn",
    "os.posix_spawnp", "os.startfile", "sys.settrace", "sys.setprofile", "sys.exit",
}
_PROCESS_PREFIXES = ("os.exec", "os.spawn")
_FILE_CALLS = {
    "os.remove", "os.unlink", "os.rmdir", "os.removedirs", "os.rename", "os.renames",
    "os.replace", "os.chdir", "os.chmod", "os.chown", "os.symlink", "os.link", "os.truncate",
    "os.mkdir", "os.makedirs", "os.write", "os.open",
}
_SAVE_CALLS = {"torch.save", "numpy.save", "numpy.savez", "numpy.savez_compressed",
               "numpy.savetxt"}
# reading a file tells a verifier's process from a user's (/proc/self/cmdline names the worker, a
# red-team finding on the CPU, 2026-11-26): refused whatever the path (``_Checker._read``)
_READ_CALLS = {"torch.load", "torch.from_file", "numpy.load", "numpy.fromfile", "numpy.loadtxt",
               "numpy.genfromtxt", "numpy.memmap", "numpy.fromregex"}
_SETTINGS_CALLS = {
    "torch.set_default_dtype", "torch.set_default_device", "torch.set_float32_matmul_precision",
    "torch.use_deterministic_algorithms", "torch.set_default_tensor_type", "os.putenv",
    "torch.set_flush_denormal",
    "os.unsetenv",
}
_LIBRARY_CALLS = {"torch.compile", "torch.ops.load_library", "torch.classes.load_library",
                  "torch.jit.script", "torch.jit.trace"}
_MUTATING_METHODS = {"add", "remove", "clear", "append", "pop", "popitem", "update", "insert",
                     "extend", "setdefault", "__setitem__", "__delitem__", "discard"}
_INTERNALS = {"__subclasses__", "__globals__", "__code__", "__builtins__", "f_globals",
              "f_locals", "f_back", "gi_frame", "tb_frame", "__closure__", "co_code"}
# a tensor's version counter tells whether torch changed it in place since a call saw it: what a
# cache of results keyed on the inputs needs to look fresh to the verifier's probe, which changes
# inputs with torch ops, while writes that bump no counter (a kernel's stores, ``.data``) go
# unseen (a red-team cache keyed on id() and ``_version``, CPU interpreter, 2026-11-26)
_VERSION_ATTRS = {"_version"}
# a tensor's C++ object address: a cache key as good as id() and ``data_ptr()``
_TENSOR_INTERNALS = {"_cdata"}
# what names the module a candidate is imported as (the worker's ``tf_<task>_<hash>`` file, not
# the user's): a candidate honest only under that name passed every check (a red-team finding,
# CPU, 2026-11-26); ``if __name__ == "__main__":`` stays allowed
_MODULE_IDENTITY = {"__name__", "__file__", "__spec__", "__loader__", "__cached__", "__package__"}
_MODULE_IDENTITY_ATTRS = {"__module__", "__file__", "__spec__", "__loader__"}


@dataclass(frozen=True)
class PolicyViolation:
    line: int
    col: int
    rule: str          # syntax | import | exec | process | file_write | file_read | monkeypatch | env
                       # | settings | library | internals | private | harness | clock | random
                       # | introspection
    message: str

    def one_line(self) -> str:
        return f"line {self.line}: {self.message} [{self.rule}]"


@dataclass(frozen=True)
class PolicyResult:
    ok: bool
    violations: tuple[PolicyViolation, ...] = ()

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(v.one_line() for v in self.violations)


def imports_of(source: str) -> frozenset[str]:
    """Every module a source imports (full dotted names), e.g. to allow a candidate what its
    original imports: ``check_source(c, allowed_imports=DEFAULT_ALLOWED_IMPORTS | imports_of(o))``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return frozenset(names)


def _under(name: str, roots: frozenset[str]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in roots)


class _Checker(ast.NodeVisitor):
    def __init__(self, allowed: frozenset[str]) -> None:
        self.allowed = allowed
        self.aliases: dict[str, str] = {}     # local name -> dotted path of a module (attribute)
        self.found: list[PolicyViolation] = []
        # ``__name__`` nodes that say nothing of the harness: ``__name__ == "__main__"`` and
        # ``logging.getLogger(__name__)``
        self._plain_names: set[int] = set()

    def flag(self, node: ast.AST, rule: str, message: str) -> None:
        self.found.append(PolicyViolation(getattr(node, "lineno", 0), getattr(node, "col_offset", 0),
                                          rule, message))

    # ---------------------------------------------------------------- name resolution
    def collect_aliases(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        root = a.name.split(".")[0]
                        self.aliases[root] = root
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name != "*":
                        self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for _ in range(3):                    # names assigned from module attributes: t = torch.cuda
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                        isinstance(node.targets[0], ast.Name):
                    path = self.resolve(node.value)
                    if path is not None:
                        self.aliases[node.targets[0].id] = path

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted module path an expression names (``torch.cuda.Event``), or None."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base is not None else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "vars" and len(node.args) == 1:
            return self.resolve(node.args[0])
        return None

    def _base_path(self, target: ast.AST) -> str | None:
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            base = target.value
            if isinstance(base, ast.Attribute) and base.attr == "__dict__":
                base = base.value
            return self.resolve(base)
        return None

    # ---------------------------------------------------------------- imports
    def _check_module(self, node: ast.AST, name: str) -> None:
        if _under(name, FORBIDDEN_MODULES):
            self.flag(node, "import", f"import of {name} is forbidden in a candidate")
        elif not _under(name, self.allowed):
            self.flag(node, "import", f"import of {name} is not allowed (allowed: "
                                      f"{', '.join(sorted(self.allowed))})")
        else:
            found = _harness_rule(name)
            if found is not None:
                self.flag(node, found[0], found[1])

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._check_module(node, a.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.flag(node, "import", "relative import: a candidate is one self-contained file")
            return
        module = node.module or ""
        self._check_module(node, module)
        for a in node.names:
            self._check_path(node, f"{module}.{a.name}")

    # ---------------------------------------------------------------- assignments
    def _check_target(self, target: ast.AST, verb: str) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._check_target(t, verb)
            return
        path = self._base_path(target)
        if path is None:
            return
        shown = ast.unparse(target)
        if path == "os.environ" or path.startswith("os.environ."):
            self.flag(target, "env", f"{verb} {shown}: changes the environment")
        else:
            self.flag(target, "monkeypatch", f"{verb} {shown}: replaces part of {path.split('.')[0]}"
                                             f" (monkeypatching what measures or runs the code)")

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t, "assigns")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, "assigns")
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, "assigns")
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._check_target(t, "deletes")
        self.generic_visit(node)

    # ---------------------------------------------------------------- names and calls
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ("__builtins__", "__import__"):
            self.flag(node, "exec", f"uses {node.id}")
        elif node.id in _MODULE_IDENTITY and isinstance(node.ctx, ast.Load) \
                and id(node) not in self._plain_names:
            self.flag(node, "introspection", f"reads {node.id}: the module's name and file are "
                                             f"the harness's, not the user's")

    def visit_Compare(self, node: ast.Compare) -> None:
        """``if __name__ == "__main__":`` is ordinary (a script's guard): its ``__name__`` says
        only whether the file runs as a script."""
        sides = [node.left, *node.comparators]
        if any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides):
            self._plain_names.update(id(x) for x in sides
                                     if isinstance(x, ast.Name) and x.id == "__name__")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _INTERNALS:
            self.flag(node, "internals", f"reaches interpreter internals through .{node.attr}")
        if node.attr in _MODULE_IDENTITY_ATTRS:
            self.flag(node, "introspection", f"reads .{node.attr}: the module's name and file are "
                                             f"the harness's, not the user's")
        if node.attr in _VERSION_ATTRS:
            self.flag(node, "private", f"reads a tensor's version counter (.{node.attr}): it "
                                       f"tells a cache whether its inputs changed")
        if node.attr in _TENSOR_INTERNALS:
            self.flag(node, "private", f"reads a tensor's internals (.{node.attr})")
        if node.attr in _CLOCK_ATTRS and isinstance(node.ctx, ast.Load):
            self.flag(node, "clock", f"reads .{node.attr}, a log record's timestamp: a candidate "
                                     f"must not depend on time")
        if node.attr in _OP_REGISTRATIONS:
            self.flag(node, "monkeypatch", f"{ast.unparse(node)} registers a kernel for one of "
                                           f"torch's ops, which the verifier uses too")
        path = self.resolve(node)
        if path is not None and self._check_path(node, path):
            return                                  # one report per chain, at its outermost
        self.generic_visit(node)

    def _check_path(self, node: ast.AST, path: str) -> bool:
        for module in FORBIDDEN_MODULES:
            if _under(path, frozenset({module})):
                self.flag(node, "import", f"uses {module}, which is forbidden in a candidate")
                return True
        found = _harness_rule(path)
        if found is not None:
            self.flag(node, found[0], found[1])
            return True
        return False

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if self.resolve(func) == "logging.getLogger":     # a logger named after its module
            self._plain_names.update(id(a) for a in node.args
                                     if isinstance(a, ast.Name) and a.id == "__name__")
        if isinstance(func, ast.Name) and func.id not in self.aliases:
            self._builtin_call(node, func.id)
        path = self.resolve(func)
        if path is not None:
            self._module_call(node, path)
        if isinstance(func, ast.Attribute) and func.attr in _MUTATING_METHODS:
            receiver = self.resolve(func.value)
            if receiver == "os.environ":
                self.flag(node, "env", f"{ast.unparse(func)}(...) changes the environment")
            elif receiver is not None:
                self.flag(node, "monkeypatch", f"{ast.unparse(func)}(...) changes state owned by "
                                               f"{receiver.split('.')[0]}")
        if isinstance(func, ast.Attribute) and func.attr in ("write_text", "write_bytes"):
            self.flag(node, "file_write", f"{ast.unparse(func)}(...) writes a file")
        if isinstance(func, ast.Attribute) and func.attr in _BUSY_QUERIES and not node.args:
            # stream.query() / event.query(): "is the GPU still busy?" is True inside the
            # timer's back-to-back loop and False in the verifier's synchronized calls
            self.flag(node, "harness", f"{ast.unparse(func)}() asks whether the GPU is still "
                                       "busy, which tells the timer's loop from a verification")
        if isinstance(func, ast.Attribute) and func.attr in _CLOCK_METHODS:
            self.flag(node, "clock", f"{ast.unparse(func)}(...) reads the GPU's clock: a "
                                     f"candidate must not depend on time")
        self.generic_visit(node)

    def _builtin_call(self, node: ast.Call, name: str) -> None:
        if name in _EXEC_BUILTINS:
            self.flag(node, "exec", f"calls {name}(): no dynamic code in a candidate")
        elif name in ("setattr", "delattr") and node.args:
            path = self.resolve(node.args[0])
            if path is not None:
                self.flag(node, "monkeypatch", f"{name}({ast.unparse(node.args[0])}, ...) "
                                               f"replaces part of {path.split('.')[0]}")
        elif name == "open":
            self._open(node)
        elif name == "globals":
            self.flag(node, "introspection", "calls globals(): the module's name and file are "
                                             "the harness's, not the user's")
        elif name == "getattr":
            self._getattr(node)
        elif name == "vars" and len(node.args) == 1 and \
                (path := self.resolve(node.args[0])) is not None:
            self.flag(node, "private", f"vars({path}): reaches any part of {path.split('.')[0]} by "
                                       f"a computed name, private ones included")

    def _getattr(self, node: ast.Call) -> None:
        """``getattr(torch, "_C")`` or ``getattr(torch, name)``: a private part by another route."""
        if len(node.args) < 2:
            return
        name = node.args[1]
        if isinstance(name, ast.Constant) and name.value in _BUSY_QUERIES | _CLOCK_METHODS:
            self.flag(node, "clock", f"getattr(..., {name.value!r}): a clock or a busy query by "
                                     f"another route")
            return
        base = self.resolve(node.args[0])
        if base is None:
            return
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            found = _harness_rule(f"{base}.{name.value}")
            if found is not None:
                self.flag(node, found[0], found[1])
        else:
            self.flag(node, "private", f"getattr({base}, <computed name>): reaches any part of "
                                       f"{base.split('.')[0]}, private ones included")

    def _module_call(self, node: ast.Call, path: str) -> None:
        if path in _PROCESS_CALLS or path.startswith(_PROCESS_PREFIXES):
            self.flag(node, "process", f"calls {path}(): no processes or interpreter hooks")
        elif path in _FILE_CALLS:
            self.flag(node, "file_write", f"calls {path}(): changes the file system")
        elif path in _SAVE_CALLS:
            self._path_argument(node, path, node.args[1] if path == "torch.save" and
                                len(node.args) > 1 else (node.args[0] if node.args else None))
        elif path in _READ_CALLS:
            self._read(node, path)
        elif path in _SETTINGS_CALLS:
            self.flag(node, "settings", f"calls {path}(): changes a global setting the original "
                                        f"and the timer rely on")
        elif path in _LIBRARY_CALLS:
            self.flag(node, "library", f"calls {path}(): the work must be done by Triton kernels "
                                       f"in this file")
        elif path in ("builtins.open", "io.open"):
            self._open(node)

    def _open(self, node: ast.Call) -> None:
        mode_node = node.args[1] if len(node.args) > 1 else \
            next((k.value for k in node.keywords if k.arg == "mode"), None)
        if mode_node is None:
            self._read(node, "open")
            return
        if not (isinstance(mode_node, ast.Constant) and isinstance(mode_node.value, str)):
            self.flag(node, "file_write", "open() with a mode that is not a constant")
            return
        if set(mode_node.value) & set("wax+"):
            self._path_argument(node, "open", node.args[0] if node.args else None)
        else:
            self._read(node, "open")

    def _read(self, node: ast.Call, what: str) -> None:
        """Any read of a file: what the files around a worker hold (its command line under
        /proc/self, the run's store beside it) tells a verifier's process from a user's."""
        arg = node.args[0] if node.args else None
        shown = ast.unparse(arg) if arg is not None else "?"
        self.flag(node, "file_read", f"{what}({shown}) reads a file: a candidate reads none (what "
                                     f"it would find tells a verifier's process from a user's)")

    def _path_argument(self, node: ast.Call, what: str, arg: ast.AST | None) -> None:
        ok = isinstance(arg, ast.Constant) and isinstance(arg.value, str) and \
            not arg.value.startswith(("/", "~", "\\")) and ".." not in arg.value.replace("\\", "/").split("/")
        if not ok:
            shown = ast.unparse(arg) if arg is not None else "?"
            self.flag(node, "file_write", f"{what}() writes to {shown}: only constant relative "
                                          f"paths inside the run directory are allowed")


def _harness_rule(path: str) -> tuple[str, str] | None:
    """(rule, message) where ``path`` lets a candidate notice the verifier, or act by time or
    chance; None where it is fine. The message names the path, not the line, so that what the
    original does itself is tolerated."""
    parts = path.split(".")
    for prefix, (rule, what) in _HARNESS_PATHS.items():
        if _under(path, frozenset({prefix})):
            return rule, f"uses {path} ({what}): a candidate must not depend on it"
    if parts[0] == "time" and len(parts) > 1 and path not in _CLOCK_ALLOWED:
        return "clock", f"uses {path} (a clock): a candidate must not depend on time"
    if parts[0] in ("torch", "triton", "sys") and \
            any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts[1:]):
        rule = "introspection" if parts[0] == "sys" else "private"
        return rule, f"uses {path}, a private part of {parts[0]} (it can disable or notice the " \
                     f"verifier's recorders)"
    return None


def _violations(source: str, allowed: frozenset[str]) -> list[PolicyViolation]:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [PolicyViolation(exc.lineno or 0, exc.offset or 0, "syntax",
                                f"syntax error: {exc.msg}")]
    checker = _Checker(allowed)
    checker.collect_aliases(tree)
    checker.visit(tree)
    return sorted(set(checker.found), key=lambda v: (v.line, v.col, v.rule))


def check_source(source: str, *, allowed_imports: frozenset[str] | None = None,
                 original: str | None = None) -> PolicyResult:
    """Check ``source`` against the policy (see the module docstring); never imports it.

    ``allowed_imports`` replaces DEFAULT_ALLOWED_IMPORTS. With ``original`` (the source the
    candidate derives from) its imports are allowed too, and what the original itself does (e.g.
    a module-level ``torch.backends.cudnn.allow_tf32 = True``) is not held against the candidate:
    2 of the 142 TritonBench-G originals would otherwise refuse their own copy.
    """
    allowed = DEFAULT_ALLOWED_IMPORTS if allowed_imports is None else allowed_imports
    if original is not None:
        allowed = allowed | imports_of(original)
    found = _violations(source, allowed)
    if original is not None and found:
        tolerated = {(v.rule, v.message) for v in _violations(original, allowed)}
        found = [v for v in found if (v.rule, v.message) not in tolerated]
    return PolicyResult(not found, tuple(found))
