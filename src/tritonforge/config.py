"""One place for settings: defaults < config file < environment < command-line flags.

The config file is TOML (``tritonforge.toml`` in the working directory, or ``--config PATH``) with
the same keys as ``Settings``'s fields, e.g. ``case_timeout_s = 120``. Environment variables are
``TRITONFORGE_<FIELD>`` in upper case (``TRITONFORGE_DEVICE=cpu``). Settings are frozen: parts
receive them, never change them. No other module reads a ``TRITONFORGE_*`` variable: code that
runs without a Settings handed to it (a GPU lock taken deep in a profile, the TritonBench-G data
folder) asks ``env_settings()``, the same precedence without flags.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

from .errors import ConfigError
from .model import Tolerance

# BENCHMARK.md's tolerances: elementwise (atol, rtol) and norm, per dtype.
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(atol=1e-6, rtol=1e-6, rel_norm=1e-6),
    "float32": Tolerance(atol=1e-4, rtol=1e-4, rel_norm=2e-4),
    "float32-dot": Tolerance(atol=1e-2, rtol=1e-2, rel_norm=5e-3),   # tl.dot runs in tf32
    "float16": Tolerance(atol=1e-2, rtol=1e-2, rel_norm=5e-3),
    "bfloat16": Tolerance(atol=2e-2, rtol=2e-2, rel_norm=2e-2),
    "float8": Tolerance(atol=1.25e-1, rtol=1.25e-1, rel_norm=6e-2),
}


FLUSH_MODES = ("write", "read")         # runtime.timing._Flusher
INTERLEAVE_MODES = ("block", "call")    # runtime.timing.time_interleaved_cuda


@dataclass(frozen=True)
class Settings:
    device: str = "auto"              # auto | cuda | cpu (cpu = Triton interpreter)
    run_dir: str = "tritonforge-runs/default"
    case_timeout_s: float = 180.0     # no progress from the worker for this long: killed
    host_memory_limit_gb: float = 16.0
    seeds: int = 3                    # seeds per correctness case
    timing_rounds: int = 10           # interleaved rounds (original, candidate, ...)
    timing_round_ms: float = 8.0      # time per variant per round. Paced samples are tight: on
    # four H100s (engine 20710a76802c, 2026-11-28) every third sample of the 1341 candidate-vs-
    # incumbent comparisons of a 13-record smoke (rounds of 25 ms) moved the median ratio by 0.5%
    # at the 90th percentile, 1% at the 99th, 2.9% at most, and put 3 of 1341 on the other side
    # of 1.05x; timing was 60-80% of every search round and final check there
    timing_warmup_ms: float = 10.0
    timing_max_calls_per_round: int = 67   # calls per variant per round at most (a quick call's
    # round is this many calls, not round_ms): a paced call costs its flush and sleep besides
    # its own time, 0.38-0.64 ms a sample for 5 us kernels on two H200s (engine c064071456aa,
    # 2026-11-28), so 200 calls made a round of 8 ms take 76-128 ms, and tiny cases took most
    # of every timing request (add_example: 24 s of a round's 34 s). A third of 200: every
    # third sample of 1341 comparisons (four H100s) moved the median ratio 1% at the 99th
    # percentile, and every third and every sixth of 263 comparisons (two H200s) 1.3% and 1.1%
    flush_l2: bool = True
    flush_mode: str = "read"          # write: zero a buffer (do_bench's); read: read one (clean L2)
    timing_interleave: str = "call"   # block: a variant's calls of a round back to back; call: turns
    timing_pace: bool = True          # a GPU sleep keeps the GPU ahead of the host: the events see
    # the kernels alone; a variant with more host work than the reference keeps its host time
    # (runtime.timing._Pacer)
    cuda_graph: bool = False
    search_autotune_rep_ms: float = 10.0  # the search's timings: each autotune config gets a short
    # do_bench of this many ms (0: Triton's own 100 ms); the final check uses Triton's own where
    # it ends by the record's cap, else this one (search.final_check)
    max_rounds: int = 8
    candidates_per_round: int = 0     # 0: auto (search.loop.auto_per_round: 16 on a GPU, 6 on
                                      # the interpreter, where each candidate runs for seconds)
    generated_cases: str = "auto"     # testgen.augment: odd sizes, value and layout variety added
                                      # to every task's correctness cases before the search: on,
                                      # off, auto (on the GPU; on the interpreter every candidate
                                      # runs them for minutes: on there only when asked)
    generated_cases_budget_s: float = 300.0   # validating them on the original, per task
    patience: int = 2                 # rounds without gain before stopping
    min_speedup: float = 1.05
    max_case_regression: float = 0.05
    profile: str = "auto"             # auto: Nsight Compute when there is a GPU; static: no ncu; off
    emit: str = "auto"                # fixed: the best config written in; autotune: @triton.autotune over
    # the best few; auto: fixed, unless one size got slower: then autotune over it and the original
    # the config search (search.config_search): ranked joint launch configs, asked before the
    # rules for this share of a round's candidates (the rules fill the rest), at most this many
    config_search: bool = True
    config_search_share: float = 0.5
    config_search_per_round: int = 32
    llm_base_url: str = ""
    llm_model: str = ""
    llm_api_key_env: str = "OPENAI_API_KEY"
    llm_max_tokens: int = 200_000     # token budget of one run, prompts + replies (0: no limit)
    # LLM proposer (optional; docs/LLM.md). Added by the LLM helper, all with defaults.
    llm_provider: str = "openai"      # openai (any OpenAI-compatible server) | anthropic
    llm_timeout_s: float = 120.0      # per HTTP attempt
    llm_max_retries: int = 4          # timeouts, 429 (Retry-After honoured) and 5xx
    llm_temperature: float = 0.2
    llm_max_reply_tokens: int = 8192  # per request (trimmed to what the budget has left)
    llm_max_cost_usd: float = 0.0     # 0: no cost limit; needs the two prices below
    llm_price_in_per_mtok: float = 0.0    # USD per million prompt tokens
    llm_price_out_per_mtok: float = 0.0   # USD per million reply tokens
    llm_candidates_per_round: int = 2
    llm_repair_attempts: int = 3      # repair turns for a failed candidate (rules first)
    llm_templates_dir: str = ""       # override some prompt templates (others: packaged)
    llm_replay: str = ""              # a transcript.jsonl: answer from it, call no model
    # The machine's arrangement, usually set by the environment (scripts/gpu_session.sh):
    gpu_lock: str = ""                # a lock file shared by processes on one GPU ("": one owns it)
    gpu_lock_scope: str = "timing"    # timing: timed runs and ncu lock; all: untimed GPU runs too
    ncu_lock: str = "shared"          # the GPU lock an ncu run takes: shared | exclusive
    progress_log: str = ""            # a file each request's stages are appended to, with the time
    compile_threads: int = 0          # compile passes compile this many kernels side by side (0:
    # a quarter of the host's cores, 1 to 8: runtime.quick_autotune.compile_in_parallel)
    untimed_nice: int = 10            # how much lower the CPU priority of workers that never time
    # and of every compile thread is (0: as the driver's; runtime.priority)
    tritonbench: str = ""             # TritonBench-G data ("": ../shared/tritonbench_g nearby)
    ncu: str = ""                     # the ncu executable ("": PATH, then the usual folders)
    cache_dir: str = ""               # measured peaks' cache ("": $XDG_CACHE_HOME/tritonforge)

    def replace(self, **changes: Any) -> "Settings":
        return dataclasses.replace(self, **changes)

    @property
    def timing(self) -> "TimingSettings":
        return _section(self, "timing")

    @property
    def search(self) -> "SearchSettings":
        return _section(self, "search")

    @property
    def verification(self) -> "VerificationSettings":
        return _section(self, "verification")

    @property
    def llm(self) -> "LlmSettings":
        return _section(self, "llm")

    @property
    def sharing(self) -> "SharingSettings":
        return _section(self, "sharing")


# Sections: frozen views of Settings by concern, so that a part takes the one it needs
# (``settings.timing``) instead of every flat field. A config file may write a field flat
# (``timing_rounds = 12``) or in its section (``[timing]`` ``rounds = 12``); the environment and
# flags name the flat field (``TRITONFORGE_TIMING_ROUNDS``, ``--timing-rounds``), as before.
@dataclass(frozen=True)
class TimingSettings:
    rounds: int
    round_ms: float
    warmup_ms: float
    max_calls_per_round: int
    flush_l2: bool
    flush_mode: str
    interleave: str
    pace: bool
    cuda_graph: bool
    search_autotune_rep_ms: float


@dataclass(frozen=True)
class SearchSettings:
    max_rounds: int
    candidates_per_round: int
    patience: int
    min_speedup: float
    max_case_regression: float
    profile: str
    emit: str


@dataclass(frozen=True)
class VerificationSettings:
    seeds: int
    case_timeout_s: float
    host_memory_limit_gb: float


@dataclass(frozen=True)
class LlmSettings:
    base_url: str
    model: str
    api_key_env: str
    max_tokens: int
    provider: str
    timeout_s: float
    max_retries: int
    temperature: float
    max_reply_tokens: int
    max_cost_usd: float
    price_in_per_mtok: float
    price_out_per_mtok: float
    candidates_per_round: int
    repair_attempts: int
    templates_dir: str
    replay: str


@dataclass(frozen=True)
class SharingSettings:
    gpu_lock: str
    gpu_lock_scope: str
    ncu_lock: str
    progress_log: str
    compile_threads: int
    untimed_nice: int


SECTIONS: dict[str, type] = {"timing": TimingSettings, "search": SearchSettings,
                             "verification": VerificationSettings, "llm": LlmSettings,
                             "sharing": SharingSettings}
_PREFIX = {"timing": "timing_", "llm": "llm_"}


def flat_field(section: str, name: str) -> str:
    """The Settings field a section's field views: ``timing.rounds`` is ``timing_rounds``."""
    prefixed = _PREFIX.get(section, "") + name
    return prefixed if prefixed in _FIELDS else name


def _section(settings: "Settings", section: str) -> Any:
    kind = SECTIONS[section]
    return kind(**{f.name: getattr(settings, flat_field(section, f.name)) for f in fields(kind)})


_FIELDS = frozenset(f.name for f in fields(Settings))

GPU_LOCK_SCOPES = ("timing", "all")
NCU_LOCK_MODES = ("shared", "exclusive")


def env_name(field: str) -> str:
    """The environment variable of a setting: ``TRITONFORGE_<FIELD>``."""
    return f"TRITONFORGE_{field.upper()}"


def env_settings() -> Settings:
    """Settings from the config file and the environment, for code that runs without Settings
    handed to it; read anew on each call, so a changed environment is seen."""
    return load_settings()


def _coerce(name: str, raw: Any, target: Any) -> Any:
    kind = type(target)
    try:
        if kind is bool:
            if isinstance(raw, str):
                if raw.lower() in ("1", "true", "yes", "on"):
                    return True
                if raw.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError(raw)
            return bool(raw)
        return kind(raw)
    except (TypeError, ValueError):
        raise ConfigError(
            f"setting {name!r} has value {raw!r}, which is not a {kind.__name__}",
            hint=f"give {name} a {kind.__name__}, e.g. {target!r}",
        ) from None


def _flatten(data: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """A config file's keys as Settings fields: ``[timing] rounds`` becomes ``timing_rounds``."""
    flat: dict[str, Any] = {}
    for key, raw in data.items():
        if key in SECTIONS and isinstance(raw, Mapping):
            known = {f.name for f in fields(SECTIONS[key])}
            for name, value in raw.items():
                if name not in known:
                    raise ConfigError(f"unknown setting {name!r} in section [{key}]",
                                      location=str(path),
                                      hint=f"known in [{key}]: " + ", ".join(sorted(known)))
                flat[flat_field(key, name)] = value
        else:
            flat[key] = raw
    return flat


def load_settings(
    config_file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build Settings from defaults, then the TOML file, then the environment, then overrides."""
    env = os.environ if env is None else env
    base = Settings()
    values: dict[str, Any] = {}
    known = {f.name for f in fields(Settings)}

    path = Path(config_file) if config_file else Path("tritonforge.toml")
    if config_file and not path.exists():
        raise ConfigError(f"config file {path} does not exist", hint="check the --config path")
    if path.exists():
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file is not valid TOML: {exc}", location=str(path)) from None
        for key, raw in _flatten(data, path).items():
            if key not in known:
                close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
                raise ConfigError(f"unknown setting {key!r}", location=str(path),
                                  hint=(f"did you mean {close[0]!r}? " if close else "")
                                  + "known settings: " + ", ".join(sorted(known)))
            values[key] = raw
    for key in known:
        env_key = env_name(key)
        if env_key in env:
            values[key] = env[env_key]
    for key, raw in (overrides or {}).items():
        if raw is None:
            continue
        if key not in known:
            raise ConfigError(f"unknown setting {key!r}")
        values[key] = raw
    coerced = {k: _coerce(k, v, getattr(base, k)) for k, v in values.items()}
    for key in ("gpu_lock_scope", "ncu_lock"):        # " Exclusive " and "" read as meant
        if key in coerced:
            coerced[key] = coerced[key].strip().lower() or getattr(base, key)
    settings = base.replace(**coerced)
    if settings.gpu_lock_scope not in GPU_LOCK_SCOPES:
        raise ConfigError(f"gpu_lock_scope (${env_name('gpu_lock_scope')}) must be timing or all, "
                          f"not {settings.gpu_lock_scope!r}",
                          hint="all: untimed GPU runs take the lock shared, for shards of one run")
    if settings.ncu_lock not in NCU_LOCK_MODES:
        raise ConfigError(f"ncu_lock (${env_name('ncu_lock')}) must be shared or exclusive, "
                          f"not {settings.ncu_lock!r}",
                          hint="exclusive makes an ncu run wait like a timing; shared is the default")
    if settings.profile not in ("auto", "static", "off"):
        raise ConfigError(f"profile must be auto, static or off, not {settings.profile!r}")
    if settings.flush_mode not in FLUSH_MODES:
        raise ConfigError(f"flush_mode must be one of {', '.join(FLUSH_MODES)}, not {settings.flush_mode!r}")
    if settings.timing_interleave not in INTERLEAVE_MODES:
        raise ConfigError(f"timing_interleave must be one of {', '.join(INTERLEAVE_MODES)}, "
                          f"not {settings.timing_interleave!r}")
    if settings.search_autotune_rep_ms < 0:
        raise ConfigError(f"search_autotune_rep_ms must be 0 (Triton's own benchmark) or more, "
                          f"not {settings.search_autotune_rep_ms!r}")
    if settings.compile_threads < 0:
        raise ConfigError(f"compile_threads must be 0 (a quarter of the host's cores) or more, "
                          f"not {settings.compile_threads!r}")
    if not 0 <= settings.untimed_nice <= 19:
        raise ConfigError(f"untimed_nice must be 0 to 19 (a nice increment), "
                          f"not {settings.untimed_nice!r}")
    if settings.generated_cases not in ("auto", "on", "off"):
        raise ConfigError(f"generated_cases must be auto, on or off, not {settings.generated_cases!r}")
    if settings.emit not in ("fixed", "autotune", "auto"):
        raise ConfigError(f"emit must be auto, fixed or autotune, not {settings.emit!r}")
    if settings.device not in ("auto", "cuda", "cpu"):
        raise ConfigError(f"device must be auto, cuda or cpu, not {settings.device!r}")
    return settings
