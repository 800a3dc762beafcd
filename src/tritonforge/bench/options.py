"""Typed options of the ``bench`` commands (frozen dataclasses; the CLI builds them from its flags,
so no argparse Namespace reaches bench code)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BaselineOptions:
    names: tuple[str, ...] = ()
    budget_s: float | None = None
    out: str = ""
    jobs: int = 1
    alone_memory_gb: float = 0.0
    rewarm_share: float = 0.25


# the most copies ``bench selfcheck --copies`` takes (``bench.selfcheck``; the CLI checks it)
MAX_COPIES = 8


@dataclass(frozen=True)
class SelfcheckOptions:
    names: tuple[str, ...] = ()
    out: str = ""
    copies: int = 2


@dataclass(frozen=True)
class PassOptions:
    """``bench optimize``: one pass, one engine, every record optimized once.

    The records: ``names``, else the names in ``names_file``, else the baseline store's runnable
    records (``size`` > 0: the subset rule's first ``size``); ``kernels`` adds kernel files
    (``PATH`` or ``PATH=SPEC``), each a record named by its file's stem."""

    names: tuple[str, ...] = ()
    names_file: str = ""
    kernels: tuple[str, ...] = ()
    baseline_store: str = ".gpu-store/baseline/store.sqlite"
    no_sweep_times: bool = False
    size: int = 0
    budget_s: float | None = None
    per_kernel_s: float = 150.0
    jobs: int = 4
    redo: tuple[str, ...] = ()          # debugging only: a pass with a redo is not publishable
    gpus: tuple[str, ...] = ()          # CUDA_VISIBLE_DEVICES names; empty: every visible GPU
    executor: str = "local"             # local | ray
    address: str = ""                   # Ray cluster (empty: a local one)
    ray_num_gpus: int = 0               # a local Ray cluster's GPUs (0: Ray detects them)
    records: str = "bench/results/records.jsonl"
    latest: str = "bench/results/LATEST.json"
    tables: str = ""                    # Markdown tables (default: beside LATEST.json, PASS.md)
    subset_file: str = "bench/results/subset-40.txt"
    group_files: tuple[str, ...] = ()   # more blocks in LATEST.json, each named by its file's stem
    allow_mixed_engines: bool = False
    out: str = ""


@dataclass(frozen=True)
class ReverifyOptions:
    records: str = "bench/results/records.jsonl"
    names: tuple[str, ...] = ()         # default: every accepted kernel not yet re-verified
    kernels: tuple[str, ...] = ()       # as PassOptions.kernels (records of kernel files)
    again: bool = False                 # re-verify those already re-verified too
    budget_s: float | None = None


@dataclass(frozen=True)
class IsolationOptions:
    names: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ("0", "1")  # timed on the first, the neighbour busy on the second
    out: str = ""
    busy_cores: int = 4                 # host cores the neighbour keeps busy (a lane's compiles)
