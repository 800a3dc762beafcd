"""The LLM proposer in the REAL optimization loop, on the CPU through Triton's interpreter.

Every scenario of the LLM issue runs through ``search.loop.Optimizer``: replies come from the
scripted loopback server (``fake_server``), candidates are evaluated in the isolated worker,
checked by the real verifier against the original and judged by the arbiter ("by correctness
only" on the interpreter). The kernel is the bundled ``sin_block4.py`` with a tiny spec (67
elements to check, 256 to "time": its 4-element blocks make the interpreter run a program per 4
elements), one seed, one or two rounds, one worker: each test makes a handful of evaluations.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_server import Error, Reply, ScriptedChatServer, Stall, fenced

from tritonforge.config import Settings
from tritonforge.llm.client import OpenAIChatClient, transcript_path
from tritonforge.llm.factory import build_proposer
from tritonforge.llm.proposer import LLMProposer
from tritonforge.llm.usage import TokenBudget, UsageRecord
from tritonforge.model import Status
from tritonforge.runtime.service import Evaluator
from tritonforge.search.loop import Optimizer
from tritonforge.search.rules import RuleProposer
from tritonforge.store import RunStore
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
SPEC = '''
entry = "sin_triton"
seeds = 1
[[case]]
id = "c"
args = [{ tensor = [67] }]
[[case]]
id = "p"
role = "performance"
args = [{ tensor = [256] }]
'''
SOURCE = EXAMPLE.read_text()


def block(n: int) -> str:
    assert "    BLOCK_SIZE = 4\n" in SOURCE
    return SOURCE.replace("    BLOCK_SIZE = 4\n", f"    BLOCK_SIZE = {n}\n")


GOOD = block(1024)                                       # what the model should propose
BROKEN = GOOD.replace("mask = offsets < n_elements", "mask = offsets <")   # SyntaxError
COS = GOOD.replace("tl.sin(x)", "tl.cos(x)")             # runs, computes something else
NOT_POW2 = block(1000)                                   # tl.arange needs a power of two
LLM = "llm:fake-model"


def malicious(marker_dir: Path) -> str:
    """GOOD plus code that would leave marker files behind if it were ever imported or run."""
    return GOOD.replace("import torch\n", (
        "import torch\n"
        "import socket\n"
        "import subprocess\n"
        f"subprocess.run(['touch', {str(marker_dir / 'spawned')!r}])\n"
        f"open({str(marker_dir / 'written')!r}, 'w').write('owned')\n"), 1).replace(
        "    out = torch.empty_like(x)\n",
        "    socket.create_connection(('evil.example', 80))\n"
        "    out = torch.empty_like(x)\n", 1)


def same(a: str, b: str) -> bool:
    return a.rstrip() == b.rstrip()


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    spec = tmp_path_factory.mktemp("spec") / "spec.toml"
    spec.write_text(SPEC)
    return task_from_file(EXAMPLE, spec)


@pytest.fixture
def server():
    with ScriptedChatServer() as srv:
        yield srv


def settings_for(tmp_path: Path, base_url: str, **kw) -> Settings:
    base = dict(device="cpu", run_dir=str(tmp_path / "run"), max_rounds=1, patience=2,
                case_timeout_s=120, seeds=1, timing_rounds=2, timing_round_ms=1.0,
                timing_warmup_ms=1.0, llm_model="fake-model", llm_base_url=base_url,
                llm_api_key_env="", llm_timeout_s=5.0, llm_max_retries=1,
                llm_candidates_per_round=1, llm_repair_attempts=2)
    base.update(kw)
    return Settings(**base)


class Run:
    """What a loop run left behind: the result, and the run store read back after it closed."""

    def __init__(self, result, store_path: Path, task_name: str):
        self.result = result
        with RunStore(store_path) as store:
            self.decisions = [d for _, d in store.decisions(task_name)]
            self.candidates = store.candidates(task_name)
            self.verified = [r for _, ev in store.evaluations(purpose="verify")
                             for r in ev.results if r.variant == "candidate"]

    @property
    def history(self) -> list[tuple[str, Status]]:
        return [(h.origin, h.status) for h in self.result.history]


def run_loop(task, settings: Settings, proposers, per_round: int = 1) -> Run:
    run_dir = Path(settings.run_dir)
    with RunStore(run_dir / "store.sqlite") as store:
        ev = Evaluator(settings, run_dir / "w0", store, device="cpu")
        try:
            result = Optimizer(task, settings, [ev], proposers, store,
                               candidates_per_round=per_round).run()
        finally:
            ev.close()
    return Run(result, run_dir / "store.sqlite", task.name)


def last_user(body: dict) -> str:
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


# ----------------------------------------------------------------------------- scenarios

def test_proposal_is_verified_in_the_worker_and_accepted(task, server, tmp_path):
    server.add(Reply(fenced(GOOD, "BLOCK_SIZE 4 -> 1024: far fewer programs."), 1200, 400))
    settings = settings_for(tmp_path, server.base_url)
    llm = build_proposer(settings, settings.run_dir)          # the factory the CLI uses
    run = run_loop(task, settings, [llm])
    r = run.result
    assert same(r.best.source, GOOD) and r.best.origin == LLM
    assert r.best.description == "BLOCK_SIZE 4 -> 1024: far fewer programs."
    assert run.history == [(LLM, Status.OK)]
    [verdict] = [v.verdict for v in run.verified]             # the real verifier passed it
    assert verdict is not None and verdict.passed and verdict.checked >= 2
    assert verdict.candidate_launches > 0
    assert r.final is not None and r.final.accepted and "correctness only" in r.final.reason
    assert all(d.accepted for d in run.decisions) and len(run.decisions) == 2   # round 1 + final
    assert len(server.requests) == 1
    assert [(u.purpose, u.outcome, u.total_tokens) for u in llm.budget.records] == \
        [("propose", "candidate", 1600)]
    assert transcript_path(settings.run_dir).exists()


def test_reply_with_a_syntax_error_is_repaired_on_the_next_turn(task, server, tmp_path):
    server.add(Reply(fenced(BROKEN)), Reply(fenced(GOOD, "Fixed the mask.")))
    settings = settings_for(tmp_path, server.base_url)
    llm = build_proposer(settings, settings.run_dir)
    run = run_loop(task, settings, [llm])
    assert [(x.kind, x.turn) for x in llm.rejections] == [("format", 1)]
    assert "SyntaxError" in last_user(server.requests[1])
    # the broken reply never reached the worker: only the original and the fix were stored
    assert {c.origin for c in run.candidates} == {"original", LLM}
    assert same(run.result.best.source, GOOD) and run.history == [(LLM, Status.OK)]
    assert run.result.final.accepted


def test_reply_failing_verification_is_rejected_then_repaired_by_the_model(task, server,
                                                                          tmp_path):
    server.add(Reply(fenced(COS, "Bigger blocks.")), Reply(fenced(GOOD, "sin again, not cos.")))
    settings = settings_for(tmp_path, server.base_url)
    llm = build_proposer(settings, settings.run_dir)
    run = run_loop(task, settings, [llm])
    r = run.result
    assert run.history == [(LLM, Status.MISMATCH), (f"repair:{LLM}", Status.OK)]
    cos_hash = r.history[0].candidate
    assert "elements outside" in r.history[0].reason           # the verifier's own report
    assert [v.status for v in run.verified] == [Status.MISMATCH, Status.OK]
    repair_prompt = last_user(server.requests[1])
    assert "Failure: mismatch" in repair_prompt and "elements outside" in repair_prompt
    assert "tl.cos(x)" in repair_prompt                        # the failed file is shown
    assert same(r.best.source, GOOD) and r.best.parent == cos_hash
    assert r.best.origin == f"repair:{LLM}" and r.final.accepted
    assert [u.purpose for u in llm.budget.records] == ["propose", "repair"]


def test_runtime_error_is_fixed_by_a_rule_repair_without_asking_the_model(task, server,
                                                                         tmp_path):
    server.add(Reply(fenced(NOT_POW2, "A block of 1000.")))
    settings = settings_for(tmp_path, server.base_url)
    run = run_loop(task, settings, [build_proposer(settings, settings.run_dir)])
    assert run.history == [(LLM, Status.RUNTIME_ERROR), ("repair:rules:pow2-blocks", Status.OK)]
    assert "power of 2" in run.result.history[0].reason
    assert same(run.result.best.source, GOOD) and len(server.requests) == 1


def test_repair_attempts_are_bounded_and_recorded(task, server, tmp_path):
    server.add(Reply(fenced(COS)), Reply(fenced(COS.replace("tl.cos(x)", "tl.cos(x) * 1.5"))),
               Reply(fenced(COS.replace("tl.cos(x)", "tl.cos(x) + 0.5"))))
    settings = settings_for(tmp_path, server.base_url, llm_repair_attempts=2)
    llm = build_proposer(settings, settings.run_dir)
    run = run_loop(task, settings, [llm])
    assert run.history == [(LLM, Status.MISMATCH), (f"repair:{LLM}", Status.MISMATCH),
                           (f"repair:{LLM}", Status.MISMATCH)]
    assert len(server.requests) == 3 and "repair attempt 2" in last_user(server.requests[2])
    assert run.result.best.hash == run.result.original.hash and run.result.final is None


def test_malicious_reply_is_refused_by_the_proposer_before_import(task, server, tmp_path):
    bad = malicious(tmp_path)
    server.add(*[Reply(fenced(bad)) for _ in range(3)])        # max_turns: 3 tries per idea
    settings = settings_for(tmp_path, server.base_url)
    llm = build_proposer(settings, settings.run_dir)
    run = run_loop(task, settings, [llm])
    assert [x.kind for x in llm.rejections] == ["policy"] * 3
    reason = llm.rejections[0].reason
    assert "subprocess" in reason and "socket" in reason
    assert "rejected by the static security policy" in last_user(server.requests[1])
    assert run.result.stop_reason == "no new candidates" and run.verified == []
    assert [c.origin for c in run.candidates] == ["original"]
    assert not (tmp_path / "spawned").exists() and not (tmp_path / "written").exists()
    assert [u.outcome for u in llm.budget.records] == ["rejected: policy"] * 3


def test_malicious_candidate_is_refused_by_the_evaluator_before_import(task, server, tmp_path):
    """Even with the proposer's own check off, the Evaluator's policy check keeps it out."""
    bad = malicious(tmp_path)
    server.add(Reply(fenced(bad)))
    settings = settings_for(tmp_path, server.base_url)
    client = OpenAIChatClient(server.base_url, "fake-model", None, timeout_s=5, max_retries=0)
    llm = LLMProposer(client, budget=TokenBudget(100_000), policy_check=False,
                      candidates_per_round=1)
    run = run_loop(task, settings, [llm])
    assert run.history == [(LLM, Status.POLICY_REJECTED)]      # not sent to repair either
    [stored] = run.verified
    assert stored.status is Status.POLICY_REJECTED and "subprocess" in stored.failure.reason
    assert len(server.requests) == 1
    assert not (tmp_path / "spawned").exists() and not (tmp_path / "written").exists()
    modules = Path(settings.run_dir) / "w0" / "worker" / "modules"
    written = [p.read_text() for p in modules.glob("*.py")] if modules.exists() else []
    assert not any("subprocess" in text for text in written)   # never written for import
    assert run.result.best.hash == run.result.original.hash


def test_timeout_and_429_are_retried_inside_the_loop(task, server, tmp_path):
    server.add(Stall(1.5), Error(429, retry_after="0.05"), Reply(fenced(GOOD)))
    settings = settings_for(tmp_path, server.base_url, llm_timeout_s=0.5, llm_max_retries=3)
    llm = build_proposer(settings, settings.run_dir)
    run = run_loop(task, settings, [llm])
    assert len(server.requests) == 3 and llm.budget.records[0].attempts == 3
    assert same(run.result.best.source, GOOD) and run.result.final.accepted


def test_token_budget_stops_the_llm_while_the_rule_engine_goes_on(task, server, tmp_path):
    server.add(Reply(fenced(GOOD), prompt_tokens=3000, completion_tokens=1000))
    settings = settings_for(tmp_path, server.base_url, max_rounds=2, llm_max_tokens=4500)
    llm = build_proposer(settings, settings.run_dir)
    run = run_loop(task, settings, [llm, RuleProposer()])
    assert len(server.requests) == 1                           # round 2 asked nothing
    assert llm.budget.exhausted and "token budget" in llm.stop_reason
    assert [x.kind for x in llm.rejections] == ["budget"]
    origins = [h.origin for h in run.result.history]
    assert origins[0] == LLM and origins[1].startswith("rules:")   # round 2: the rule engine
    assert run.result.rounds == 2 and run.result.final.accepted
    assert "BLOCK_SIZE = 1024\n" not in run.result.best.source     # moved on from the LLM's


def test_replay_reproduces_the_run_without_the_server(task, tmp_path):
    steps = [Reply(fenced(BROKEN), 900, 300), Reply(fenced(COS, "Bigger blocks."), 1000, 350),
             Reply(fenced(GOOD, "sin again."), 1500, 400)]
    with ScriptedChatServer(steps) as srv:
        settings = settings_for(tmp_path / "live", srv.base_url)
        live_llm = build_proposer(settings, settings.run_dir)
        live = run_loop(task, settings, [live_llm])
        assert len(srv.requests) == 3
        dead_url = srv.base_url
    transcript = transcript_path(settings.run_dir)
    replay_settings = settings_for(tmp_path / "replay", dead_url, llm_replay=str(transcript))
    replay_llm = build_proposer(replay_settings, replay_settings.run_dir)
    replayed = run_loop(task, replay_settings, [replay_llm])

    def key(run: Run):
        return ([(h.candidate, h.origin, h.status, h.reason) for h in run.result.history],
                [(d.candidate, d.accepted, d.reason) for d in run.decisions],
                run.result.best.hash)

    assert live.history == [(LLM, Status.MISMATCH), (f"repair:{LLM}", Status.OK)]
    assert key(replayed) == key(live)
    assert replay_llm.client.remaining == 0
    assert replay_llm.budget.used == live_llm.budget.used
    assert [u.outcome for u in replay_llm.budget.records] == \
        [u.outcome for u in live_llm.budget.records]
    assert all(u.replayed for u in replay_llm.budget.records)


def test_optimize_command_records_llm_usage_in_the_store(task, server, tmp_path, monkeypatch,
                                                         capsys):
    from tritonforge import cli

    # The LLM is asked first (build_proposers); the rule engine's five more candidates would only
    # make the test slower, so it proposes nothing here, and the config search is off.
    monkeypatch.setattr(RuleProposer, "propose", lambda self, ctx: [])
    server.add(Reply(fenced(GOOD, "Bigger blocks."), 1200, 400))
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    run_dir = tmp_path / "run"
    for k, v in {"LLM_MODEL": "fake-model", "LLM_BASE_URL": server.base_url,
                 "LLM_API_KEY_ENV": "", "LLM_CANDIDATES_PER_ROUND": "1", "SEEDS": "1", "CONFIG_SEARCH": "0",
                 "TIMING_ROUNDS": "2", "TIMING_ROUND_MS": "1", "TIMING_WARMUP_MS": "1"}.items():
        monkeypatch.setenv(f"TRITONFORGE_{k}", v)
    code = cli.main(["optimize", str(EXAMPLE), "--spec", str(spec), "--device", "cpu",
                     "--run-dir", str(run_dir), "--rounds", "1", "--jobs", "1"])
    assert code == 0, capsys.readouterr().err[-2000:]
    with RunStore(run_dir / "store.sqlite") as store:
        records = store.records("llm_usage")
    [(key, rec)] = records
    assert isinstance(rec, UsageRecord) and key.startswith(f"{task.name}:")
    assert (rec.purpose, rec.outcome, rec.prompt_tokens, rec.completion_tokens) == \
        ("propose", "candidate", 1200, 400)
    assert len(server.requests) == 1


def test_build_proposers_asks_the_llm_first_and_turns_it_on_for_a_replay(tmp_path):
    from tritonforge.api import build_proposers

    live = Settings(llm_model="m", llm_base_url="http://127.0.0.1:9/v1", llm_api_key_env="")
    assert [p.name for p in build_proposers(live, tmp_path)] == ["llm:m", "config-search", "rules"]
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text("")
    replay = Settings(llm_replay=str(transcript))
    assert [p.name for p in build_proposers(replay, tmp_path)] == ["llm:replay", "config-search", "rules"]
    assert [p.name for p in build_proposers(Settings(), tmp_path)] == ["config-search", "rules"]
    assert [p.name for p in build_proposers(Settings(config_search=False), tmp_path)] == ["rules"]
