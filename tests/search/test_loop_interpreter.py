"""The loop end to end through Triton's interpreter on the bundled example (accepting by
correctness, since CPU times are not performance), and a wrong proposal rejected by the loop."""

from dataclasses import replace

import pytest

from tritonforge.config import Settings
from tritonforge.model import Candidate, Status
from tritonforge.runtime.evaluator import Evaluator
from tritonforge.search import budget as budget_mod
from tritonforge.search.loop import Optimizer
from tritonforge.search.rules import RuleProposer
from tritonforge.search.stages import RoundStages
from tritonforge.store import RunStore
from tritonforge.tasks.loader import task_from_file


class FixedProposer:
    """Proposes one given source once: a stand-in for any proposer."""

    name = "fixed"

    def __init__(self, source, description):
        self.source, self.description, self.done = source, description, False

    def propose(self, context):
        if self.done:
            return []
        self.done = True
        return [Candidate(self.source, "fixed", context.incumbent.hash, self.description)]

    def repair(self, request):
        return None


@pytest.fixture()
def task(sin_task):
    return sin_task             # tests/search/conftest.py: the bundled sin example, two cases


def _optimize(task, tmp_path, proposers, rounds=1):
    settings = Settings(device="cpu", max_rounds=rounds, patience=1, case_timeout_s=120)
    with RunStore(tmp_path / "store.sqlite") as store:
        ev = Evaluator(settings, tmp_path / "w0", store, device="cpu")
        try:
            opt = Optimizer(task, settings, [ev], proposers, store, candidates_per_round=2)
            result = opt.run()
        finally:
            ev.close()
        return result, store.decisions(task.name)


def test_rule_engine_end_to_end_on_the_interpreter(task, tmp_path):
    result, decisions = _optimize(task, tmp_path, [RuleProposer()])
    assert result.best.hash != result.original.hash
    assert "BLOCK_SIZE = 4\n" not in result.best.source          # the block size moved
    assert result.final is not None and result.final.accepted
    assert "correctness only" in result.final.reason
    assert decisions, "decisions are stored"
    # where the wall time went: each phase that ran, once, and no more than the whole
    names = [p.name for p in result.phases]
    assert names[:3] == ["baseline", "profile", "propose"] and "verify" in names
    assert names[-1] == "final check" and len(set(names)) == len(names)
    assert all(p.wall_s >= 0 and p.queued_s == 0 for p in result.phases)   # one process
    assert sum(p.wall_s for p in result.phases) <= result.wall_s


def test_a_wrong_proposal_is_rejected_and_the_original_kept(task, tmp_path):
    wrong = task.source.replace("tl.sin(x)", "tl.cos(x)")
    result, _ = _optimize(task, tmp_path, [FixedProposer(wrong, "cos instead of sin")])
    assert result.best.hash == result.original.hash
    assert [h.status for h in result.history] == [Status.MISMATCH]
    assert result.final is None


class MisconfiguredProposer(FixedProposer):
    def propose(self, context):
        from tritonforge.errors import ConfigError

        raise ConfigError("llm_base_url is not a URL", hint="set llm_base_url")


class BuggyProposer(FixedProposer):
    def propose(self, context):
        raise RuntimeError("a bug in a proposer")


def test_a_misconfigured_proposer_stops_the_run_with_its_message(task, tmp_path):
    from tritonforge.errors import ConfigError

    with pytest.raises(ConfigError, match="not a URL"):
        _optimize(task, tmp_path, [MisconfiguredProposer("", "")])


def test_a_buggy_proposer_does_not_end_the_run(task, tmp_path):
    result, _ = _optimize(task, tmp_path, [BuggyProposer("", "")])
    assert result.stop_reason == "no new candidates" and result.best.hash == result.original.hash


class RecordingProposer(FixedProposer):
    def __init__(self):
        super().__init__("", "")
        self.contexts = []

    def propose(self, context):
        self.contexts.append(context)
        return []


def test_the_profile_diagnosis_reaches_the_proposers(task, tmp_path):
    spy = RecordingProposer()
    settings = Settings(device="cpu", max_rounds=1, patience=1, case_timeout_s=120,
                        run_dir=str(tmp_path / "run"))
    with RunStore(tmp_path / "store.sqlite") as store:
        ev = Evaluator(settings, tmp_path / "w0", store, device="cpu")
        try:
            result = Optimizer(task, settings, [ev], [spy], store).run()
        finally:
            ev.close()
    diagnosis = spy.contexts[0].diagnosis
    assert diagnosis is not None and "larger_blocks" in {h.kind for h in diagnosis.hints}
    assert any(n.startswith("diagnosis (static-only)") for n in result.notes)


def test_no_case_the_original_runs_ends_the_run_before_any_proposal(sin_task, tmp_path):
    spec = tmp_path / "spec.toml"                   # the one sin_task was read from
    spec.write_text(spec.read_text().replace('args = [{ tensor = [257] }]',
                                             'args = [{ tensor = [257] }, 3]'))
    task = task_from_file(sin_task.source_path, spec)   # "c" passes an extra argument: it fails
    broken = replace(task, cases=tuple(c for c in task.cases if c.id == "c"))
    result, _ = _optimize(broken, tmp_path, [FixedProposer("x = 1\n", "never proposed")])
    assert result.tried == 0 and "no case left" in result.stop_reason


def test_late_cases_join_the_verification_as_its_generated_tier(task, tmp_path):
    """Cases made while the original is measured (compose: generated cases on a spare worker)
    are waited for after the profile and verify every candidate: one wrong only at a size the
    task's own cases lack is rejected there."""
    from tritonforge.model import Case, CaseRole

    own = task.cases[0]
    at_300 = replace(own, id="gen-300", generated=True,
                     recipe=replace(own.recipe, args=(replace(own.recipe.args[0], shape=(300,)),)))
    asked = []

    def late():
        asked.append(1)
        return (at_300,)

    wrong = task.source.replace("n_elements = x.numel()",
                                "n_elements = x.numel() - (1 if x.numel() == 300 else 0)")
    assert wrong != task.source
    settings = Settings(device="cpu", max_rounds=1, patience=1, case_timeout_s=120)
    with RunStore(tmp_path / "store.sqlite") as store:
        ev = Evaluator(settings, tmp_path / "w0", store, device="cpu")
        try:
            opt = Optimizer(task, settings, [ev], [FixedProposer(wrong, "one short at 300")],
                            store, candidates_per_round=2, late_cases=late)
            result = opt.run()
        finally:
            ev.close()
    assert asked == [1]
    assert result.best.hash == result.original.hash
    assert [h.status for h in result.history] != [Status.OK]
    assert "gen-300" in result.history[0].reason
    assert "cases" in [p.name for p in result.phases]


class _Late:
    """Late cases not yet made when the profile ends: ``ready()`` says False the first
    ``not_before`` times it is asked."""

    def __init__(self, cases, not_before):
        self.cases, self.not_before, self.asked, self.called = cases, not_before, 0, 0

    def ready(self):
        self.asked += 1
        return self.asked > self.not_before

    def __call__(self):
        self.called += 1
        return self.cases


class _Busy:
    """The pool's last worker while it makes the late cases: the rounds must not use it."""

    def __init__(self, inner, late):
        self.inner, self.late, self.used_early = inner, late, 0
        self.device = inner.device

    def evaluate(self, *args, **kwargs):
        if not self.late.called:
            self.used_early += 1
        return self.inner.evaluate(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _gen_300(task):
    own = task.cases[0]
    return replace(own, id="gen-300", generated=True,
                   recipe=replace(own.recipe, args=(replace(own.recipe.args[0], shape=(300,)),)))


def test_late_cases_not_ready_after_the_profile_join_before_the_final_check(task, tmp_path):
    """Round 1 starts without cases still being made, on the pool less its last worker; they
    join before the final check, which rejects a best wrong only there."""
    wrong = task.source.replace("n_elements = x.numel()",
                                "n_elements = x.numel() - (1 if x.numel() == 300 else 0)")
    settings = Settings(device="cpu", max_rounds=1, patience=1, case_timeout_s=120)
    late = _Late((_gen_300(task),), not_before=10)
    with RunStore(tmp_path / "store.sqlite") as store:
        ev0 = Evaluator(settings, tmp_path / "w0", store, device="cpu")
        ev1 = _Busy(Evaluator(settings, tmp_path / "w1", store, device="cpu"), late)
        try:
            opt = Optimizer(task, settings, [ev0, ev1], [FixedProposer(wrong, "one short at 300")],
                            store, candidates_per_round=2, late_cases=late)
            result = opt.run()
        finally:
            ev0.close()
            ev1.inner.close()
    assert late.called == 1 and ev1.used_early == 0
    assert any("still being made" in n for n in result.notes)
    assert [h.status for h in result.history] == [Status.OK]      # round 1 had no gen-300
    assert result.best.hash == result.original.hash               # the final check had it
    assert "gen-300" in result.final.reason
    assert opt.stages.evaluators == [ev0, ev1]


def test_late_cases_ready_at_a_round_boundary_join_the_next_round(task, tmp_path):
    """Made during round 1, the cases verify round 2's candidates."""
    wrong = task.source.replace("n_elements = x.numel()",
                                "n_elements = x.numel() - (1 if x.numel() == 300 else 0)")
    settings = Settings(device="cpu", max_rounds=2, patience=2, case_timeout_s=120)
    late = _Late((_gen_300(task),), not_before=2)   # after the profile, before round 1
    proposers = [FixedProposer("x = 1\n", "round 1: no kernel"),
                 FixedProposer(wrong, "one short at 300")]
    with RunStore(tmp_path / "store.sqlite") as store:
        ev = Evaluator(settings, tmp_path / "w0", store, device="cpu")
        try:
            opt = Optimizer(task, settings, [ev], proposers, store, candidates_per_round=1,
                            late_cases=late)
            result = opt.run()
        finally:
            ev.close()
    assert late.called == 1
    assert any("joined the verification after round 1" in n for n in result.notes)
    wrong_entry = [h for h in result.history if "300" in h.description]
    assert wrong_entry and wrong_entry[0].status is not Status.OK and "gen-300" in wrong_entry[0].reason


def test_a_hung_verification_ends_at_the_records_cap_not_the_workers_limit(task, tmp_path):
    """Every request of a budgeted record is killed at its cap (1.25x the budget): a candidate
    that hangs is cut there, SKIPPED (never judged, never stored), and the record ends by the
    cap, not at the worker's no-progress limit (120 s here). On an H100 pass (2026-11-26, 120 s a
    record) a hung verification request carried chunked_cumsum_fwd to 271 s."""
    from tritonforge.runtime.worker_client import CUT_REASON

    hangs = task.source.replace("    return", "    while True:\n        pass\n    return", 1)
    assert hangs != task.source
    settings = Settings(device="cpu", max_rounds=1, patience=1, case_timeout_s=120)
    budget_s = 20.0
    with RunStore(tmp_path / "store.sqlite") as store:
        ev = Evaluator(settings, tmp_path / "w0", store, device="cpu")
        try:
            opt = Optimizer(task, settings, [ev], [FixedProposer(hangs, "hangs")], store,
                            candidates_per_round=2)
            result = opt.run(budget_s)
            assert ev.time_left is None         # the cap is the record's alone
        finally:
            ev.close()
    assert result.wall_s <= 1.25 * budget_s + 2, result.wall_s
    assert [h.status for h in result.history] == [Status.SKIPPED]
    assert CUT_REASON in result.history[0].reason
    assert result.best.hash == result.original.hash


def test_a_baseline_cut_at_the_cap_is_out_of_time_not_a_failing_original(task, tmp_path):
    """A budget too short for the original's own baseline ends the record as out of time: the
    bench's records call a stop that starts "the original" original-fails, which it is not."""
    from tritonforge.bench.records import EngineId, RecordRef, pass_record

    settings = Settings(device="cpu", max_rounds=1, patience=1, case_timeout_s=120)
    with RunStore(tmp_path / "store.sqlite") as store:
        ev = Evaluator(settings, tmp_path / "w0", store, device="cpu")
        try:
            result = Optimizer(task, settings, [ev], [RuleProposer()], store).run(0.5)
        finally:
            ev.close()
    assert result.stop_reason.startswith("time budget spent before the original's baseline ended")
    record = pass_record(RecordRef(task.name), result, EngineId("e", "s"), "h", 0.5)
    assert record.status == "not-improved"


def test_a_baseline_past_its_share_of_the_budget_leaves_the_original_unprofiled(task, tmp_path,
                                                                               monkeypatch):
    """search.budget.BudgetPolicy.profile_go: past PROFILE_SKIP_SHARE of the budget before the
    profile (here every second counts), no profile runs; the rounds propose from the source."""
    def no_profile(*args, **kwargs):
        raise AssertionError("profiled")

    monkeypatch.setattr(budget_mod, "PROFILE_SKIP_SHARE", 0.0)
    monkeypatch.setattr(RoundStages, "_diagnose", no_profile)
    settings = Settings(device="cpu", max_rounds=1, patience=1, case_timeout_s=120)
    with RunStore(tmp_path / "store.sqlite") as store:
        ev = Evaluator(settings, tmp_path / "w0", store, device="cpu")
        try:
            result = Optimizer(task, settings, [ev], [RuleProposer()], store,
                               candidates_per_round=2).run(600.0)
        finally:
            ev.close()
    assert any(n.startswith("not profiled: ") for n in result.notes), result.notes
    assert result.history                    # round 1 still proposed and verified
