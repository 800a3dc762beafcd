"""Turn a case recipe into a ready-to-run call of one variant module (in the worker process).

``InvocationBuilder.build(module, case, seed)`` gives an ``Invocation``: a zero-argument callable
that runs the variant on freshly built inputs, plus the arguments it receives (so that in-place
writes can be compared). Inputs depend only on (case, seed), never on the variant, so the original
and a candidate always see identical values.
"""

from __future__ import annotations

import logging
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from ..model import CapturedCall, Case, PerfScriptCall, SpecCall, TestSectionCall, content_hash
from ..verify.tree import iter_tensors, map_tensors, move_storages
from . import perf_inputs
from .drawn_inputs import drawn_on
from .inputs import build_args, clone_tree, seed_everything
from .loader import module_key, write_module_file
from .sized_inputs import SizePlan, Unsized, plan_sizes

log = logging.getLogger(__name__)


@dataclass
class Invocation:
    """``call`` reseeds torch's generators and runs the variant (for verification: kernels and
    wrappers that draw random numbers must see the same stream in the original and a candidate);
    ``timed`` runs it without reseeding. Reseeding costs 100-150 us of host time per call
    (measured on an H100, scripts/gpu_timing_probe.py, 2026-11-23): inside a timed call it
    dwarfed a 5 us kernel and pulled every small case's speedup towards 1.0."""

    call: Callable[[], Any]
    arguments: list[Any] = field(default_factory=list)
    timed: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        if self.timed is None:
            self.timed = self.call


KEEP_SHARE = 0.25      # a pristine copy is kept only where it takes at most this share of the
                       # device's free memory (``InvocationBuilder._device_inputs``)


# A performance build handed to a variant on a GPU lies at the start of a buffer with room after
# it (``tail_padded``): an original that reads or writes a little past its arguments' end (their
# sizes are the script's, the kernel's indexing its own) then stays in memory the process owns,
# as it did when every size of the script was built at once and its neighbours were other
# inputs. Drawn one size at a time, token_softmax_llama's original (its 3-D logits indexed as
# 2-D: rows up to 510 past the end, 1 MB) hit an illegal memory access on its two largest sizes
# while it was timed and on five more in the final check's fresh process, and no performance
# case was left to judge a candidate (four H200s, engine b5d2db76c1e1, 2026-11-28). The pad is
# filled with 0x7F bytes, not zeros: a candidate that drops a mask reads garbage there, as it
# would in the wild, where zeros would add nothing to a sum.
TAIL_PAD_MIN = 2 << 20          # bytes after each storage: a quarter of it, within these bounds
TAIL_PAD_MAX = 64 << 20
TAIL_PAD_TOTAL = 1 << 30        # at most this much padding per build (the first storages get it)
TAIL_FILL = 0x7F
PADDED_DEVICES = ("cuda",)      # the device types whose builds are padded


def _tail_pad_bytes(nbytes: int) -> int:
    pad = min(max(nbytes // 4, TAIL_PAD_MIN), TAIL_PAD_MAX)
    return (pad + 511) // 512 * 512


def tail_padded(inputs: Any) -> Any:
    """``inputs`` with each distinct storage of its tensors on a ``PADDED_DEVICES`` device moved
    to the start of a buffer with a pad of ``TAIL_FILL`` bytes after it
    (``verify.tree.move_storages``; the tensors re-pointed in place, values, strides and
    alignment unchanged; the tensors of one storage move together), while the pads total at most
    ``TAIL_PAD_TOTAL``; a storage past that, or whose move would run out of device memory, stays
    where it is, as do host tensors (a pinned one would lose its pinning)."""
    tensors = [t for _, t in iter_tensors(inputs, "") if t.device.type in PADDED_DEVICES]
    total, padded = 0, {}                # storage -> whether it gets a pad
    for t in tensors:
        key = t.untyped_storage().data_ptr()
        if key not in padded:
            pad = _tail_pad_bytes(t.untyped_storage().nbytes())
            padded[key] = total + pad <= TAIL_PAD_TOTAL
            total += pad if padded[key] else 0
    move_storages([t for t in tensors if padded[t.untyped_storage().data_ptr()]],
                  lambda nbytes: (0, _tail_pad_bytes(nbytes)), TAIL_FILL, mark=True)
    return inputs


def _aliases(inputs: Any) -> Any:
    """New tensor objects on the storages of ``inputs``' tensors (same offsets, sizes, strides,
    ``requires_grad``): moving them (``tail_padded``) copies the bytes and leaves ``inputs``."""
    def alias(t: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            a = torch.empty(0, dtype=t.dtype, device=t.device).set_(
                t.untyped_storage(), t.storage_offset(), t.size(), t.stride())
        return a.requires_grad_(t.requires_grad) if t.is_leaf else a
    return map_tensors(inputs, alias)


def _padded_copy(kept: Any) -> Any:
    """A variant's own copy of the pristine ``kept`` inputs, padded (``tail_padded``); a tensor
    whose storage could not move (no device memory for the move, a host tensor) is cloned, so
    no variant writes into ``kept``."""
    ptrs = {t.untyped_storage().data_ptr() for _, t in iter_tensors(kept, "")}
    copy = tail_padded(_aliases(kept))
    return map_tensors(copy, lambda t: clone_tree(t) if t.untyped_storage().data_ptr() in ptrs
                       else t)


def _free_device_bytes(device: str) -> int | None:
    """Free memory on ``device`` (None where it cannot be read: nothing is kept)."""
    try:
        free, _ = torch.cuda.mem_get_info(torch.device(device))
    except Exception:       # noqa: BLE001 - no CUDA, another backend: keep nothing
        return None
    return int(free)


def _dense(t: torch.Tensor) -> bool:
    """Whether ``t``'s elements fill its span without overlap or gaps, in some order of its
    dimensions: then a clone keeps its strides."""
    if t.numel() <= 1:
        return True
    expected = 1
    for stride, size in sorted((st, sz) for st, sz in zip(t.stride(), t.size()) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def reusable_on_device(inputs: Any, free_bytes: int | None) -> bool:
    """Whether a device clone of ``inputs`` (``runtime.inputs.clone_tree``) gives a variant what
    ``to_cuda`` gave it: a tree of plain tuples, lists and dicts (a namedtuple would come back a
    tuple) whose leaves are immutable scalars (nothing else could be shared between variants) or
    leaf tensors (a clone is a leaf) that clone with their strides (dense, non-overlapping) and
    share no storage with another leaf (clones would not), taking at most ``KEEP_SHARE`` of
    ``free_bytes``."""
    if free_bytes is None:
        return False
    total = 0
    storages: set[int] = set()
    stack = [inputs]
    while stack:
        value = stack.pop()
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()
            if value.grad_fn is not None or not _dense(value) or storage.data_ptr() in storages:
                return False
            storages.add(storage.data_ptr())
            total += storage.nbytes()
        elif type(value) in (tuple, list):
            stack.extend(value)
        elif type(value) is dict:
            stack.extend(value.values())
        elif not (value is None or isinstance(value, (bool, int, float, complex, str, torch.dtype))):
            return False
    return total <= KEEP_SHARE * free_bytes


class CaptureError(RuntimeError):
    """The test section never made the requested call (or failed before it)."""


class _Captured(BaseException):
    """BaseException so that a test section's own ``except Exception`` cannot swallow it."""

    def __init__(self, args: tuple, kwargs: dict):
        super().__init__("captured")
        self.args_ = args
        self.kwargs_ = kwargs


def _entry_callable(module: types.ModuleType, entry: str) -> Callable[..., Any]:
    target = getattr(module, entry)
    if isinstance(target, type) and hasattr(target, "apply"):
        return target.apply          # torch.autograd.Function subclasses
    return target


class InvocationBuilder:
    """Builds invocations for one task in one worker; caches what is expensive to rebuild.

    ``reference`` is the original module: captured calls are recorded by running the test section
    against it (the oracle), then replayed on any variant.
    """

    def __init__(self, reference: types.ModuleType, device: str, module_dir: Path):
        self.reference = reference
        self.device = device
        self.module_dir = module_dir
        self._captures: dict[tuple[str, int, int], tuple[tuple, dict]] = {}
        self._perf_inputs: dict[tuple[int, int], list[Any]] = {}
        self._perf_instances: dict[tuple[str, int], Any] = {}
        self._code: dict[tuple[str, int], Any] = {}
        self._kept_on_device: tuple[tuple[int, int, int], Any] | None = None
        # (script, seed) -> its sizes as shapes (runtime.sized_inputs), one script at a time;
        # scripts whose sizes cannot be drawn apart are built whole
        self._size_plan: tuple[tuple[int, int], SizePlan] | None = None
        self._sized: tuple[tuple[int, int, int], Any] | None = None
        self._unsized: set[int] = set()
        # whether this worker draws sizes on its device: unknown until the first draw there;
        # once one succeeded a failure is the build's (the values of a (case, seed) never change
        # path, so the original's re-runs see what its first run saw)
        self._device_draws: bool | None = None
        self._moved_drawn: set[int] = set()     # scripts whose to_cuda took a device draw

    def compile_file(self, source: str, kind: str):
        """Compile ``source`` from a real file: @triton.jit kernels defined in test sections and
        perf scripts need ``inspect.getsource``, which needs a file."""
        key = (kind, hash(source))
        code = self._code.get(key)
        if code is None:
            path = write_module_file(self.module_dir / "scripts", f"{kind}_{content_hash(source)}", source)
            code = compile(source, str(path), "exec")
            self._code[key] = code
        return code

    # ------------------------------------------------------------------ public
    def build(self, module: types.ModuleType, case: Case, seed: int) -> Invocation:
        recipe = case.recipe
        if isinstance(recipe, SpecCall):
            return self._spec_call(module, recipe, seed)
        if isinstance(recipe, PerfScriptCall):
            return self._perf_call(module, recipe, seed)
        if isinstance(recipe, TestSectionCall):
            return self._test_section(module, recipe, seed)
        if isinstance(recipe, CapturedCall):
            return self._captured_call(module, recipe, seed)
        raise TypeError(f"unknown recipe {type(recipe).__name__}")

    # ------------------------------------------------------------------ recipes
    def _spec_call(self, module: types.ModuleType, recipe: SpecCall, seed: int) -> Invocation:
        gen = torch.Generator().manual_seed(seed)
        args = build_args(tuple(recipe.args), gen, self.device)
        kwargs = {k: build_args(v, gen, self.device) for k, v in recipe.kwargs}
        fn = _entry_callable(module, recipe.entry)

        def run() -> Any:
            return fn(*args, **kwargs)

        def call() -> Any:
            seed_everything(seed)
            return run()

        return Invocation(call, [*args, *kwargs.values()], run)

    def _perf_instance(self, module: types.ModuleType, recipe: PerfScriptCall) -> Any:
        key = (module_key(module), hash(recipe.script))
        if key in self._perf_instances:
            return self._perf_instances[key]
        package = sys.modules.get("TritonBench_v1")
        if package is None:
            package = types.ModuleType("TritonBench_v1")
            package.__path__ = []  # type: ignore[attr-defined]
            sys.modules["TritonBench_v1"] = package
        qualified = f"TritonBench_v1.{recipe.module_name}"
        previous = sys.modules.get(qualified)
        sys.modules[qualified] = module
        setattr(package, recipe.module_name, module)
        namespace: dict[str, Any] = {
            "__name__": f"tf_perf_{module_key(module)}",
            "__file__": str(self.module_dir / "perf" / f"perf_{recipe.module_name}.py"),
        }
        try:
            exec(self.compile_file(recipe.script, f"perf_{recipe.module_name}"), namespace)
        finally:
            if previous is not None:
                sys.modules[qualified] = previous
        instance = namespace["performance_metrics"]()
        self._perf_instances[key] = instance
        return instance

    def _perf_folder(self, recipe: PerfScriptCall, seed: int,
                     index: int | None = None) -> Path | None:
        """The run's disk folder for the script's inputs at ``seed``: every size, or the one
        ``index`` drawn apart (``runtime.sized_inputs``); None without a shared folder."""
        root = perf_inputs.cache_dir()
        if root is None:
            return None
        # as the in-memory cache: never the variant
        key = content_hash(f"{recipe.script}\0{seed}" + ("" if index is None else f"\0size {index}"))
        return root / f"{recipe.module_name}-{key}"

    def _perf_input(self, instance: Any, recipe: PerfScriptCall, seed: int) -> Any:
        """The inputs of size ``recipe.index``: that size alone where the script's sizes can be
        drawn apart (``_one_size``), else from this worker's memory, from the run's disk cache
        (``runtime.perf_inputs``: built there by one worker of the run, the others wait and
        load), or built (all sizes: that is how the scripts work)."""
        key = (hash(recipe.script), seed)
        if key in self._perf_inputs:
            return self._perf_inputs[key][recipe.index]
        one = self._one_size(instance, recipe, seed)
        if one is not None:
            return one[0]

        def build() -> list[Any]:
            self._perf_inputs.clear()    # one script's inputs at a time: they can be large
            try:
                seed_everything(seed)
                with drawn_on(self.device):      # random values drawn on the GPU (drawn_inputs)
                    instance.get_input_tensors()
            except Exception as exc:             # noqa: BLE001 - the script as written decides
                if self.device == "cpu":
                    raise
                log.warning("%s: performance inputs drawn on the GPU failed (%s: %s); built on "
                            "the host", recipe.module_name, type(exc).__name__, exc)
                instance.input_tensors = []      # a script that appends must not keep a half set
                seed_everything(seed)
                instance.get_input_tensors()
            built = list(instance.input_tensors)
            instance.input_tensors = []
            return built

        folder = self._perf_folder(recipe, seed)
        if folder is None:
            self._perf_inputs[key] = build()
            return self._perf_inputs[key][recipe.index]
        got = perf_inputs.obtain(folder, build)
        if got.built is None:
            return perf_inputs.load(folder, recipe.index)
        if not got.stored:
            self._perf_inputs[key] = got.built
        return got.built[recipe.index]   # when stored, the rest is on disk: nothing large stays resident

    def _size_plan_for(self, instance: Any, recipe: PerfScriptCall, seed: int) -> SizePlan | None:
        """The script's sizes as shapes at ``seed`` (``runtime.sized_inputs``), one script at a
        time; None where they cannot be drawn apart (remembered: that script is built whole
        from then on)."""
        script = hash(recipe.script)
        if script in self._unsized:
            return None
        key = (script, seed)
        if self._size_plan is None or self._size_plan[0] != key:
            self._size_plan = None
            try:
                self._size_plan = (key, plan_sizes(instance, seed))
            except Unsized as exc:
                self._refuse_sizes(recipe, exc)
                return None
        return self._size_plan[1]

    def _refuse_sizes(self, recipe: PerfScriptCall, exc: Unsized) -> None:
        log.info("%s: performance inputs built whole: %s", recipe.module_name, exc)
        self._unsized.add(hash(recipe.script))
        self._size_plan = self._sized = None

    def _one_size(self, instance: Any, recipe: PerfScriptCall, seed: int) -> tuple[Any] | None:
        """(size ``recipe.index``'s inputs on the host,) drawn without the other sizes
        (``runtime.sized_inputs``), shared through the run's disk folder as a set of one
        (``runtime.perf_inputs``); None where the script's sizes cannot be drawn apart."""
        if hash(recipe.script) in self._unsized:
            return None
        sized = (hash(recipe.script), seed, recipe.index)
        if self._sized is not None and self._sized[0] == sized:
            return (self._sized[1],)

        def build() -> list[Any]:
            plan = self._size_plan_for(instance, recipe, seed)
            if plan is None:
                raise Unsized("refused")
            try:
                with drawn_on(self.device):      # its draws made on the GPU (drawn_inputs)
                    return [plan.materialize(recipe.index, seed)]
            except Unsized:
                raise
            except Exception as exc:             # noqa: BLE001 - as the full build: on the host
                if self.device == "cpu":
                    raise
                log.warning("%s: performance inputs drawn on the GPU failed (%s: %s); drawn on "
                            "the host", recipe.module_name, type(exc).__name__, exc)
                return [plan.materialize(recipe.index, seed)]

        folder = self._perf_folder(recipe, seed, recipe.index)
        try:
            if folder is None:
                got = build()[0]
            else:
                obtained = perf_inputs.obtain(folder, build)
                got = perf_inputs.load(folder, 0) if obtained.built is None \
                    else obtained.built[0]
        except Unsized as exc:
            if hash(recipe.script) not in self._unsized:
                self._refuse_sizes(recipe, exc)
            return None
        self._sized = (sized, got) if folder is None else None    # on disk: loaded again, mapped
        return (got,)

    def _drawn_on_device(self, instance: Any, recipe: PerfScriptCall, seed: int) -> Any | None:
        """Size ``recipe.index``'s inputs drawn on the device itself, without the other sizes
        and without the host (``SizePlan.materialize``): a draw of GBs takes milliseconds there,
        where the host's way (drawn, copied to the host, stored to disk, loaded, moved back) took
        most of a record's baseline: fast_rope_embedding's fourteen sizes, 34 GB of host
        tensors, took 77 s of its 120 s on an H200 (engine c064071456aa, 2026-11-28). None where
        the sizes cannot be drawn apart or a draw asks for a gradient (the host's way), or where
        this worker's first draw on the device failed. A failure after a draw there succeeded
        is the build's: falling back would give a (case, seed) other values than an earlier
        build of it (the host's way draws whole sets from the case's seed), and an original
        re-run on them would seem to vary by itself."""
        if self._device_draws is False:
            return None
        plan = self._size_plan_for(instance, recipe, seed)
        if plan is None or not plan.on_device(recipe.index):
            return None
        try:
            drawn = plan.materialize(recipe.index, seed, self.device)
        except Exception as exc:
            if self._device_draws:
                raise                        # drawn there before: this build fails, as a run
            # never drawn on this device (no CUDA here): this worker draws on the host from now
            log.warning("%s: performance inputs drawn on the device failed (%s: %s); drawn on "
                        "the host", recipe.module_name, type(exc).__name__, exc)
            self._device_draws = False
            return None
        self._device_draws = True
        return drawn

    def _perf_call(self, module: types.ModuleType, recipe: PerfScriptCall, seed: int) -> Invocation:
        instance = self._perf_instance(module, recipe)
        if self.device == "cpu":
            inputs = clone_tree(self._perf_input(instance, recipe, seed))
        else:
            inputs = self._device_inputs(instance, recipe, seed)

        def run() -> Any:
            return instance.call_op(inputs)

        def call() -> Any:
            seed_everything(seed)
            return run()

        return Invocation(call, [inputs], run)

    def _device_inputs(self, instance: Any, recipe: PerfScriptCall, seed: int) -> Any:
        """The inputs of size ``recipe.index`` on the device, for one variant: a device clone of
        a pristine copy kept from the last build of the same size and seed, else moved from the
        host (``to_cuda``) and, where ``reusable_on_device`` allows, kept pristine for the next
        variant. Every variant of a request builds the same case in turn, and moving a large size
        from the host each time cost most of a timing request: fast_ce_loss's 4.2 GB case took
        47 s for 17 variants before its first timed call (two H200s, 2026-11-28), where a device
        clone takes milliseconds. A size only the one variant needs is kept until the next build
        of another size: one size at a time. Where the script's sizes can be drawn apart, the
        size is drawn on the device itself (``_drawn_on_device``), never on the host."""
        key = (hash(recipe.script), seed, recipe.index)
        kept = self._kept_on_device
        if kept is not None and kept[0] == key:
            return _padded_copy(kept[1])     # a padded copy: the kept one stays
        self._kept_on_device = None          # the last size's copy goes before this one is built
        drawn = self._drawn_on_device(instance, recipe, seed)
        inputs = None
        if drawn is not None:
            script = hash(recipe.script)
            try:
                inputs = instance.to_cuda(drawn)
            except Exception as exc:  # noqa: BLE001 - a to_cuda that wants host tensors
                if script in self._moved_drawn:
                    raise                    # it took them before: this build fails, as a run
                log.info("%s: to_cuda refused inputs drawn on the device (%s: %s); drawn on the "
                         "host", recipe.module_name, type(exc).__name__, exc)
                self._unsized.add(script)
            else:
                self._moved_drawn.add(script)
            del drawn
        if inputs is None:
            inputs = instance.to_cuda(clone_tree(self._perf_input(instance, recipe, seed)))
        reusable = reusable_on_device(inputs, _free_device_bytes(self.device))
        inputs = tail_padded(inputs)
        if reusable:
            self._kept_on_device = (key, clone_tree(inputs))
        return inputs

    def perf_case_count(self, recipe: PerfScriptCall, seed: int = 0) -> int:
        """How many sizes the script builds: from its sizes as shapes where they can be drawn
        apart (``runtime.sized_inputs``), else from its built inputs."""
        key = (hash(recipe.script), seed)
        if key not in self._perf_inputs:
            plan = self._size_plan_for(self._perf_instance(self.reference, recipe), recipe, seed)
            if plan is not None:
                return len(plan)
        self._perf_call(self.reference, recipe, seed)   # fills the input cache
        if key in self._perf_inputs:
            return len(self._perf_inputs[key])
        folder = self._perf_folder(recipe, seed)
        count = perf_inputs.stored_count(folder) if folder is not None else None
        assert count is not None, "inputs neither in memory nor on disk"
        return count

    def _drawn(self, run: Callable[[], Any], what: str) -> Any:
        """``run()`` (seeded inside) with host random tensors drawn on the GPU (``drawn_inputs``),
        and once more as written if it fails so: a test section builds its inputs as it calls
        the kernels. destindex_copy's one case ran 3.9-4.2 s a run on an H100 host, ten runs a
        candidate's verification (2026-11-27); its section draws 100M fp16 values on the host,
        0.8 s on one core of a 2-core CI machine. Both sides of a comparison run the same way, so
        only the random values differ from a host draw, as from another seed."""
        if self.device == "cpu":
            return run()
        try:
            with drawn_on(self.device):
                return run()
        except Exception as exc:             # noqa: BLE001 - the section as written decides
            log.info("%s: drawn on the GPU it failed (%s: %s); run as written", what,
                     type(exc).__name__, exc)
            return run()

    def _test_section(self, module: types.ModuleType, recipe: TestSectionCall, seed: int) -> Invocation:
        code = self.compile_file(recipe.source, "test_section")

        def once() -> Any:
            namespace = dict(module.__dict__)
            seed_everything(seed)
            exec(code, namespace)
            return namespace.get(recipe.result_name)

        return Invocation(lambda: self._drawn(once, "a test section"), [])

    def capture(self, recipe: CapturedCall, seed: int) -> tuple[tuple, dict]:
        key = (recipe.source, recipe.call_index, seed)
        if key in self._captures:
            return self._captures[key]
        namespace = dict(self.reference.__dict__)
        target = getattr(self.reference, recipe.entry)
        is_class = isinstance(target, type) and hasattr(target, "apply")
        inner = target.apply if is_class else target
        seen = 0

        def recorder(*args: Any, **kwargs: Any) -> Any:
            nonlocal seen
            if seen == recipe.call_index:
                raise _Captured(clone_tree(args), clone_tree(kwargs))
            seen += 1
            return inner(*args, **kwargs)

        if is_class:
            namespace[recipe.entry] = types.SimpleNamespace(apply=recorder)
        else:
            namespace[recipe.entry] = recorder
        code = self.compile_file(recipe.source, "test_section")

        def once() -> None:
            nonlocal seen
            seen = 0
            seed_everything(seed)
            exec(code, dict(namespace))

        try:
            self._drawn(once, "a test section's capture")
        except _Captured as got:
            self._captures[key] = (got.args_, got.kwargs_)
            return self._captures[key]
        raise CaptureError(
            f"the test section made {seen} call(s) of {recipe.entry}, "
            f"none with index {recipe.call_index}")

    def _captured_call(self, module: types.ModuleType, recipe: CapturedCall, seed: int) -> Invocation:
        args, kwargs = self.capture(recipe, seed)
        args, kwargs = clone_tree(args), clone_tree(kwargs)
        fn = _entry_callable(module, recipe.entry)

        def run() -> Any:
            return fn(*args, **kwargs)

        def call() -> Any:
            seed_everything(seed)
            return run()

        return Invocation(call, [*args, *kwargs.values()], run)
