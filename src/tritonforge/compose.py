"""The one composition root of an optimization: evaluators, prestarted final-check workers,
proposers and the ``Optimizer``, built from ``Settings`` and typed options.

``api.optimize`` (one task), the bench's per-GPU lanes and its Ray tasks (many tasks, one after
the other, on one set of workers) all build their runs here, so that a kernel optimized by the
CLI and one optimized in a benchmark pass go through the same objects. It sits above search and
llm and below bench and api (``docs/ARCHITECTURE.md``: the import order); it runs in the
driver-side process of a run (the process that owns the workers), never inside a worker.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from .config import Settings
from .llm.factory import build_proposer
from .model import Case, Task, VariantResult
from .model.progress import ProgressSink
from .runtime.evaluator import Evaluator, PrestartedEvaluators
from .runtime.gpu_lock import lock_one_gpu
from .runtime.hardware import resolve_device
from .runtime.perf_inputs import remove_for
from .search.config_search import ConfigSearchProposer
from .search.loop import GeneratedCounts, Optimizer
from .search.rules import RuleProposer
from .store import RunStore
from .testgen.augment import Augmented, generated_cases

log = logging.getLogger(__name__)

# generated cases (testgen.augment) take 5-36 s a TritonBench-G record on an H100 (torch 2.11),
# counted in the record's budget: at most this share of it
GENERATED_CASES_SHARE = 0.25


@dataclass(frozen=True)
class SessionOptions:
    """How the workers of an optimization session are laid out.

    ``jobs``: verification workers side by side (the first also times). ``work_dir``: where the
    workers keep their modules (default: ``settings.run_dir``)."""

    jobs: int = 1
    work_dir: str | None = None


def build_proposers(settings: Settings, run_dir: Path) -> list:
    """The rule engine always, the config search unless ``settings.config_search`` is off; an
    LLM proposer too when a model (or a replay) is configured.

    The LLM comes first: the loop asks proposers in order until the round is full, and the rule
    engine alone fills a round on most kernels; asked first, the LLM takes its
    ``llm_candidates_per_round`` and the rules fill the rest.
    """
    proposers: list = [RuleProposer()]
    if settings.config_search:
        # before the rules, for its share of the round: the rules fill the rest
        proposers.insert(0, ConfigSearchProposer(settings.config_search_per_round,
                                                 share=settings.config_search_share))
    if settings.llm_model or settings.llm_replay:
        llm = build_proposer(settings, run_dir)
        if llm is not None:
            proposers.insert(0, llm)
    return proposers


def ahead_proposers(settings: Settings) -> list:
    """Proposers of their own for compiling round 1's likely candidates while the original is
    measured (``search.ahead``): the config search, which needs only the source (the rules
    follow the profile's hints, which do not exist yet). None when the config search is off."""
    if not settings.config_search:
        return []
    return [ConfigSearchProposer(settings.config_search_per_round, share=1.0)]


def record_llm_usage(store: RunStore, task_name: str, proposers: list) -> int:
    """Keep every LLM request's ``UsageRecord`` in the run store (kind ``llm_usage``).

    Keys are ``<task>:<run stamp>:<seq>``, so a resumed run adds its requests to the earlier
    ones instead of overwriting them. Returns how many records were written.
    """
    stamp, written = time.strftime("%Y%m%dT%H%M%S"), 0
    for p in proposers:
        for rec in getattr(getattr(p, "budget", None), "records", ()):
            store.put_record("llm_usage", f"{task_name}:{stamp}:{rec.seq:05d}", rec)
            written += 1
    return written


def _in_background(task: Task, *args) -> Future:
    """``generated_cases(task, *args)`` in a thread of its own; its Future never raises (a
    failure leaves the task unchanged, with a note)."""
    def make() -> Augmented:
        try:
            return generated_cases(task, *args)
        except Exception as exc:  # noqa: BLE001 - generated cases are extra checks, not the run
            log.warning("generated cases for %s failed: %s", task.name, exc)
            return Augmented(task, (), notes=(f"no generated cases: {type(exc).__name__}: {exc}",))

    runner = ThreadPoolExecutor(1, thread_name_prefix="generated-cases")
    try:
        return runner.submit(make)
    finally:
        runner.shutdown(wait=False)


def _abandon(pending: Future | None, maker: Evaluator) -> None:
    """The record is over: generated cases still being made can no longer judge anything, so
    their worker's request (``maker``, the pool's last) is cut rather than waited for; it starts again
    on its next request, and the background generation ends with a note. On an H100 pass
    (2026-11-26) a record whose original ran out of host memory in its baseline at 60 s waited
    for its generated cases until 193 s, 1.6x its budget. Its later requests come back unsent:
    on two H200s (2026-11-26, 20 s a record) a record whose baseline was cut at its 25 s cap
    ended at 114 s, the generation's requests running on uncapped after the record's end."""
    if pending is not None and not pending.done():
        maker.abandon()     # unsent from now, the request in flight cut (runtime.evaluator)


def _settled(pending: Future | None, task: Task) -> Augmented:
    """What the background generation made, once it is done (nothing made without one)."""
    return Augmented(task, ()) if pending is None else pending.result()


class _GeneratedOf:
    """The search's ``late_cases``: called, waits for the background generation and returns its
    generated cases; ``ready()`` says whether that call returns at once (``search.loop``)."""

    def __init__(self, pending: Future, task: Task):
        self.pending, self.task = pending, task

    def ready(self) -> bool:
        return self.pending.done()

    def __call__(self) -> tuple[Case, ...]:
        made = _settled(self.pending, self.task)
        return tuple(c for c in made.task.cases if c.generated)


class OptimizeSession:
    """Workers for optimizing one task or many, one after another (a context manager).

    The verification pool and the pool of prestarted final-check workers live as long as the
    session; each ``optimize`` builds fresh proposers and a fresh ``Optimizer``.
    """

    def __init__(self, settings: Settings, store: RunStore, options: SessionOptions = SessionOptions(),
                 device: str | None = None):
        self.settings = settings
        self.store = store
        self.work_dir = Path(options.work_dir or settings.run_dir)
        self.device = device or resolve_device(settings.device)
        if self.device == "cuda":
            # every worker of the session shares the one GPU: none runs beside a timing
            lock_one_gpu(self.work_dir / "gpu.lock")
        # the first worker also times (search.loop's timer); the others never do
        self.evaluators = [Evaluator(settings, self.work_dir / f"w{i}", store, device=self.device,
                                     respawn=True, times=i == 0)
                           for i in range(max(1, options.jobs))]
        self._finals: list[Evaluator] = []
        self.final_pool = PrestartedEvaluators(self._final_evaluator)

    def _final_evaluator(self) -> Evaluator:
        """A fresh final-check evaluator, told the GPU the timing worker reported once it has
        started (``runtime.worker_client.Worker.quiet_start``)."""
        made = Evaluator(self.settings, self.work_dir / f"final{len(self._finals)}", self.store,
                         device=self.device, known_device=self.evaluators[0].worker.info)
        self._finals.append(made)
        return made

    def optimize(self, task: Task, budget_s: float | None,
                 progress: ProgressSink | None = None,
                 known_baseline: VariantResult | None = None):
        """Run the loop on ``task`` for at most ``budget_s`` (its final check included);
        returns the ``OptimizeResult``. ``progress`` receives the loop's ``ProgressEvent``s."""
        proposers: list = []
        pending: Future | None = None
        try:
            # odd sizes and value/layout variety: cases its own tests lack (Settings.generated_cases)
            # made in at most a quarter of the record's budget; with a pool of two or more
            # workers, on its last worker while the timing worker measures and profiles the
            # original (an H100 pass at 120 s a record spent 5-71 s on them before the search)
            started = time.monotonic()
            share = None if budget_s is None else min(self.settings.generated_cases_budget_s,
                                                      GENERATED_CASES_SHARE * budget_s)
            made: Augmented | None = None
            late_cases = None
            if len(self.evaluators) > 1:
                pending = _in_background(task, self.settings, self.work_dir / "generated",
                                         self.evaluators[-1], progress, share)
                late_cases = _GeneratedOf(pending, task)
            else:
                made = generated_cases(task, self.settings, self.work_dir / "generated",
                                       self.evaluators[0], progress, share)
                task = made.task
                if budget_s is not None:
                    budget_s = max(budget_s - (time.monotonic() - started), 0.0)
            proposers = build_proposers(self.settings, self.work_dir)
            optimizer = Optimizer(task, self.settings, self.evaluators, proposers, self.store,
                                  progress, make_final_evaluator=self.final_pool,
                                  known_baseline=known_baseline, late_cases=late_cases,
                                  ahead_proposers=ahead_proposers(self.settings))
            result = optimizer.run(budget_s)
            _abandon(pending, self.evaluators[-1])
            made = made or _settled(pending, task)
            # the record's time is the generated cases' (when made first) and the search's
            setup = time.monotonic() - started - result.wall_s
            return replace(result, wall_s=result.wall_s + max(setup, 0.0),
                           first_verified_s=None if result.first_verified_s is None
                           else round(result.first_verified_s + max(setup, 0.0), 1),
                           generated=GeneratedCounts(len(made.added),
                                                     sum(d.refused for d in made.dropped),
                                                     round(made.seconds, 1),
                                                     result.generated.verify_s_per_candidate))
        finally:
            _abandon(pending, self.evaluators[-1])     # a record stopped by an exception too
            _settled(pending, task)     # its worker is the pool's: never busy into the next record
            self.evaluators[-1].time_left = None
            record_llm_usage(self.store, task.name, proposers)
            remove_for(Path(self.settings.run_dir) / "perf-inputs", task.name)   # can be GBs

    @property
    def worker_info(self):
        """The timing worker's HardwareInfo (None before it ran anything)."""
        return self.evaluators[0].worker.info

    def kill(self) -> None:
        """Kill every worker this session started, at once (a pass cut at its deadline: a worker
        busy timing would not read a polite shutdown in time)."""
        for e in self.evaluators + self._finals:
            e.worker.kill()

    def close(self) -> None:
        self.final_pool.close()
        for e in self.evaluators:
            e.close()

    def __enter__(self) -> "OptimizeSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
