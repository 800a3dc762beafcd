"""The config-search proposer: many ranked launch configs per round, for any kernel (driver side).

Where the rule proposer (``search.rules``) moves one knob at a time, this proposer searches the
joint space of every launch site (``search.config_space``: tile sizes written at the launch,
num_warps, num_stages), prunes it against the device before anything compiles, ranks it with a
cheap model and returns the best ``context.budget`` configs as candidates, each made by the
transforms the rules use (``constexpr_override`` for each tile, then ``launch_params``). It needs
no kernel name or pattern: only the launch analysis. Why: overriding num_warps/num_stages alone,
no code change, made 4 of 6 TritonBench-G kernels probed at least 1.05x faster on their three
largest cases (H200, DESIGN.md); the rules' one-knob steps and their handful of candidates per
round stop short of such configs on kernels they were not tuned on.

Across rounds it remembers every config it proposed (by site and values) and what the loop
measured for it (``context.history``: speedup or failure), and never proposes a config twice.
Round 1 spreads the budget over the model's ranking (at most a few configs per tile combination,
so warps and stages do not fill a round for one tile). Later rounds are a local search: the
ranking is re-weighted towards the neighbours of the configs that measured fastest (the accepted
incumbent's own config is the new centre, since its launch now holds it), and away from configs
near ones that failed. ``context.config_search_only`` (a near-roofline stop: one round of this
search alone, the rule proposer returns nothing) gives it the whole budget.

Where the user's code computes the config -- a kernel sized by ``@triton.heuristics``, a
num_warps the wrapper computes per size -- a literal would pin one value for every size (or, for
heuristics, change nothing): those configs scale what the code computes instead
(``search.scaled_configs``), nearest first, each proposed once.

Launch sites and lists of scaled configs are served in turn (round-robin), those of kernels the
profile saw launched first, and the others only for ``COLD_SHARE`` of a call's budget once those
are spent.
Asked before the rules (``compose.build_proposers``), it takes ``share`` of the round's budget
(``Settings.config_search_share``) and leaves the rest to them; what they leave unfilled it tops
up (``top_up``, asked by ``search.stages.RoundStages._propose``).
"""

from __future__ import annotations

import ast
import logging
import math
from dataclasses import dataclass

from ..analyze import analyze_source
from ..errors import TransformError
from ..model import Candidate, ProposalContext, RepairRequest, Status, content_hash
from .config_space import (
    LaunchConfig, RankedConfig, SiteSpace, autotune_space, problem_elements, rank_site, site_space,
)
from .prune import limits_for_hardware, task_element_bytes
from .rules import autotune_picks_of, profiled_kernels
from .scaled_configs import ScaledConfig, scaled_lists

# ``..transforms`` is imported inside functions: it needs libcst, which the GPU image lacks, and
# this module must import there.

log = logging.getLogger(__name__)

ORIGIN = "config-search"
PER_TILE = 3                # configs per tile combination in one round, before the rest fill it
NEAR_BEST = 0.6             # weight of a measured gain on its neighbours' rank (per log2 speedup)
NEAR_FAILED = 0.3           # penalty of a failure on its neighbours' rank
CONFIG_ONLY_SHARE = 0.85    # of a round of configuration search alone (14 of 16): the rest first
                            # to the rules' host-side moves, then back to it (a top-up)
# Of a call's budget, what the launch sites of kernels the profile never saw launched may take
# once those it saw are spent (where it saw some of the sites'): layer_norm_ops' round 1 (H200
# pass, engine c064071456aa, 2026-11-28) was 12 configs of its backward kernel, which the
# forward entry never launches, all within noise of 1.000x, in an 88 s timing that left no
# room for a second round.
COLD_SHARE = 0.125


@dataclass(frozen=True)
class Proposed:
    """One config this proposer made into a candidate."""

    candidate: str          # hash
    config: LaunchConfig
    round: int


def apply_config(source: str, config: LaunchConfig, base: LaunchConfig,
                 memo: dict | None = None) -> str:
    """``source`` with ``config`` written at its launch site (TransformError when a step cannot
    be made): each changed tile through ``constexpr_override`` (the grid follows; ``memo``
    keeps those rewrites, which several configs of a round share), then num_warps/num_stages by
    their text (``transforms.launch_fast``), or through ``launch_params`` where that cannot."""
    from ..transforms import get
    from ..transforms.launch_fast import write_launch_options

    memo = {} if memo is None else memo
    old = dict(base.blocks)
    for n, v in config.blocks:
        if old.get(n) == v:
            continue
        key = (content_hash(source), n, v, config.site)
        if key not in memo:
            params = {"name": n, "value": v, "site": config.site}
            analysis = analyze_source(source)
            transform = get("constexpr_override")
            ok = transform.applies(analysis, **params)
            memo[key] = transform.apply(source, analysis, **params) if ok else \
                TransformError(f"constexpr_override {params}: {ok.reason}")
        if isinstance(memo[key], TransformError):
            raise memo[key]
        source = memo[key]
    options = {}
    if config.num_warps != base.num_warps and config.num_warps:
        options["num_warps"] = config.num_warps
    if config.num_stages != base.num_stages and config.num_stages:
        options["num_stages"] = config.num_stages
    if not options:
        return source
    analysis = analyze_source(source) if ("analysis", content_hash(source)) not in memo \
        else memo[("analysis", content_hash(source))]
    memo[("analysis", content_hash(source))] = analysis
    site = analysis.site(config.site)
    ordinal = [s.index for s in analysis.sites_of(config.kernel)].index(config.site)
    fast = None if site.alias_partners else \
        write_launch_options(source, config.kernel, ordinal, options)
    if fast is not None:
        return fast
    transform = get("launch_params")
    ok = transform.applies(analysis, **options, site=config.site)
    if not ok:
        raise TransformError(f"launch_params {options}: {ok.reason}")
    return transform.apply(source, analysis, **options, site=config.site)


def add_autotune_config(source: str, config: LaunchConfig,
                        base: tuple[tuple[str, int], ...]) -> str:
    """``source`` with ``config`` appended to its kernel's ``@triton.autotune`` list (the base
    config's other values kept) through ``autotune_widen``: the autotuner then measures it beside
    the listed ones and keeps the faster, per key."""
    from ..transforms import ConfigSpec, get

    tiles = dict(config.blocks)
    spec = ConfigSpec(tuple((n, tiles.get(n, v)) for n, v in base), config.warps, config.stages)
    analysis = analyze_source(source)
    params = {"kernel": config.kernel, "configs": [spec]}
    transform = get("autotune_widen")
    ok = transform.applies(analysis, **params)
    if not ok:
        raise TransformError(f"autotune_widen {spec.render()}: {ok.reason}")
    return transform.apply(source, analysis, **params)


def _base(context: ProposalContext) -> str:
    """What the configs proposed from ``context`` are remembered under: "" for the incumbent (a
    config proposed once is not proposed again when an accepted one moves it), the near miss's
    hash in a branch round (``search.branch``: the same config on other code is a new candidate)."""
    return context.incumbent.hash if context.branch else ""


class ConfigSearchProposer:
    """Ranked joint launch configs for every launch site; see the module docstring."""

    name = "config-search"

    def __init__(self, max_per_round: int = 32, per_tile: int = PER_TILE, share: float = 1.0):
        self.max_per_round = max_per_round
        self.per_tile = per_tile
        self.share = share          # of the round's budget taken (all of it for a config-only round)
        self._proposed: dict[str, Proposed] = {}        # candidate hash -> config
        self._keys: set[tuple] = set()      # (base, kernel, config key) ever proposed: base ""
                                            # for the incumbent, a near miss's hash in a branch
        self._memo: dict = {}                           # tile rewrites and analyses, this round
        self.dropped = 0                                # configs pruned before compiling, all rounds

    # -------------------------------------------------------------- what was measured
    def _outcomes(self, context: ProposalContext) -> tuple[list[tuple[LaunchConfig, float]],
                                                           list[LaunchConfig]]:
        """(configs measured OK with their speedup, configs that failed) from the history."""
        good, bad = [], []
        for h in context.history:
            p = self._proposed.get(h.candidate)
            if p is None:
                continue
            if h.status is Status.OK and h.speedup is not None:
                good.append((p.config, h.speedup))
            elif h.status.is_failure and h.status not in (Status.PRUNED, Status.SKIPPED):
                bad.append(p.config)
        return good, bad

    def _rerank(self, ranked: list[RankedConfig], good, bad) -> list[RankedConfig]:
        if not good and not bad:
            return ranked
        out = []
        for r in ranked:
            bonus = 0.0
            for cfg, speedup in good:
                if cfg.site == r.config.site and cfg.kernel == r.config.kernel and speedup > 1.0:
                    bonus = max(bonus, NEAR_BEST * math.log2(speedup) * 8
                                * math.exp(-r.config.distance(cfg)))
            for cfg in bad:
                if cfg.site == r.config.site and cfg.kernel == r.config.kernel:
                    bonus -= NEAR_FAILED * math.exp(-r.config.distance(cfg))
            out.append(RankedConfig(r.config, r.score + bonus, r.why))
        return sorted(out, key=lambda r: -r.score)

    # -------------------------------------------------------------- proposing
    def _site_lists(self, context: ProposalContext
                    ) -> list[tuple[SiteSpace, list[RankedConfig], bool]]:
        source = context.incumbent.source
        analysis = analyze_source(source)
        tree = ast.parse(source)
        limits = limits_for_hardware(context.hardware)
        nbytes = task_element_bytes(context.task)
        problem = problem_elements(context.task)
        profiled = profiled_kernels(context.profile)
        good, bad = self._outcomes(context)
        lists = []
        picks = autotune_picks_of(context.profile, analysis) if context.profile else {}
        spaces = [site_space(analysis, knobs, tree) for knobs in analysis.knobs]
        spaces += [autotune_space(analysis, k.name, picks.get(k.name), tree)
                   for k in analysis.kernels if k.autotune is not None]
        for space in spaces:
            if space is None or space.size <= 1:
                continue
            ranked, dropped = rank_site(tree, space, limits, nbytes, context.diagnosis, problem,
                                        context.hardware.sm_count)
            self.dropped += len(dropped)
            if dropped:
                log.info("%s launch %d: %d config(s) pruned before compiling, e.g. %s",
                         space.kernel, space.site, len(dropped), dropped[0].reason[:160])
            ranked = [r for r in ranked
                      if (_base(context), space.kernel, r.config.key) not in self._keys]
            lists.append((space, self._rerank(ranked, good, bad),
                          bool(profiled) and space.kernel not in profiled))
        lists.sort(key=lambda x: x[2])        # sites of kernels the profile saw first (stable)
        return lists

    def _pick(self, ranked: list[RankedConfig], n: int) -> list[RankedConfig]:
        """The best ``n``, at most ``per_tile`` per tile combination unless too few remain."""
        first, rest, per = [], [], {}
        for r in ranked:
            t = r.config.blocks
            if per.get(t, 0) < self.per_tile:
                per[t] = per.get(t, 0) + 1
                first.append(r)
            else:
                rest.append(r)
        return (first + rest)[:n]

    def propose(self, context: ProposalContext) -> list[Candidate]:
        """Its share of the round; in a round of configuration search alone, all of it but
        ``CONFIG_ONLY_SHARE`` leaves, for the rules' host-side moves (``rules.HOST_SIDE_MOVES``);
        what they leave unused comes back to it as a top-up (``search.stages``)."""
        return self._configs(context, CONFIG_ONLY_SHARE if context.config_search_only
                             else self.share)

    def top_up(self, context: ProposalContext) -> list[Candidate]:
        """More configs for the rest of a round the other proposers left short: all of
        ``context.budget`` (up to ``max_per_round`` a call), none proposed before."""
        return self._configs(context, 1.0)

    def _scaled_lists(self, context: ProposalContext) -> list[tuple[bool, list[ScaledConfig]]]:
        """Per heuristics-sized kernel and per launch with a computed num_warps
        (``search.scaled_configs``), (whether the profile did not see the kernel launched, its
        configs not proposed before, nearest first); those of kernels the profile saw first."""
        analysis = analyze_source(context.incumbent.source)
        profiled = profiled_kernels(context.profile)
        lists = []
        for kernel, configs in scaled_lists(analysis):
            configs = [c for c in configs if (_base(context), kernel, c.key) not in self._keys]
            if configs:
                lists.append((bool(profiled) and kernel not in profiled, configs))
        lists.sort(key=lambda x: x[0])
        return lists

    def _configs(self, context: ProposalContext, share: float) -> list[Candidate]:
        budget = min(math.ceil(context.budget * share), self.max_per_round)
        if budget <= 0:
            return []
        sites = self._site_lists(context)
        scaled = self._scaled_lists(context)
        if not sites and not scaled:
            return []
        self._memo = {}
        # one lane per launch site and per list of scaled configs, served in turn; the lanes of
        # kernels the profile never saw launched only once those it saw are spent: served in the
        # same turns, they took half of ksoftmax_triton's round for its backward kernel, which its
        # forward entry never launches (H100 pass, 2026-11-27)
        Lane = list[tuple[SiteSpace | None, RankedConfig | ScaledConfig]]
        hot: list[Lane] = []
        cold: list[Lane] = []
        for space, ranked, unseen in sites:
            (cold if unseen else hot).append([(space, r) for r in self._pick(ranked, budget)])
        for unseen, configs in scaled:
            (cold if unseen else hot).append([(None, c) for c in configs[:budget]])
        tried = {h.candidate for h in context.history} | {context.incumbent.hash}
        out: list[Candidate] = []
        source = context.incumbent.source
        for lanes in (hot, cold):
            if lanes is cold and hot:
                # at most a few: a kernel the profiled case never launched changes nothing there
                budget = min(budget, len(out) + max(1, math.ceil(budget * COLD_SHARE)))
            depth = 0
            while len(out) < budget and any(depth < len(lane) for lane in lanes):
                for lane in lanes:
                    if depth >= len(lane) or len(out) >= budget:
                        continue
                    space, r = lane[depth]
                    cand = self._candidate(source, r, space, context) if space is not None \
                        else self._scaled_candidate(source, r, context)
                    if cand is not None and cand.hash not in tried:
                        tried.add(cand.hash)
                        out.append(cand)
                depth += 1
        return out

    def _scaled_candidate(self, source: str, cfg: ScaledConfig,
                          context: ProposalContext) -> Candidate | None:
        self._keys.add((_base(context), cfg.kernel, cfg.key))
        try:
            new = cfg.apply(source)
        except TransformError as exc:
            log.debug("config %s not applied: %s", cfg, exc)
            return None
        return Candidate(new, ORIGIN, context.incumbent.hash, f"config {cfg.description()}")

    def _candidate(self, source: str, r: RankedConfig, space: SiteSpace,
                   context: ProposalContext) -> Candidate | None:
        cfg, current = r.config, space.current
        self._keys.add((_base(context), cfg.kernel, cfg.key))
        try:
            new = apply_config(source, cfg, current, self._memo) if space.autotune_base is None \
                else add_autotune_config(source, cfg, space.autotune_base)
        except TransformError as exc:
            log.debug("config %s not applied: %s", cfg, exc)
            return None
        if new == source:
            return None
        changes = ", ".join(cfg.changes(current))
        where = f"at launch {cfg.site}" if space.autotune_base is None else \
            "added to @triton.autotune"
        cand = Candidate(new, ORIGIN, context.incumbent.hash,
                         f"config {changes} {where} ({cfg.kernel}; model {r.score:+.2f}"
                         + (f": {r.why}" if r.why else "") + ")")
        self._proposed[cand.hash] = Proposed(cand.hash, cfg, context.round)
        return cand

    def config_of(self, candidate_hash: str) -> LaunchConfig | None:
        p = self._proposed.get(candidate_hash)
        return p.config if p else None

    def repair(self, request: RepairRequest) -> Candidate | None:
        """None: a config that fails is repaired by the literal rules of ``search.repair``
        (fewer stages, smaller tiles, powers of two), which run before any proposer's."""
        return None


__all__ = ["ConfigSearchProposer", "apply_config"]
