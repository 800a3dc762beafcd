"""Size dispatch (search.dispatch): two verified versions joined by a Python size test at the
launch, each used where the final check found it faster."""

import math
import re
from pathlib import Path

import pytest

from tritonforge.config import Settings
from tritonforge.model import Candidate, Decision
from tritonforge.runtime.evaluator import Evaluator
from tritonforge.search.dispatch import (
    NotDispatchable, Rule, choose_rule, dispatch_source, probe_kinds, probe_source, read_probe,
    size_expression, statement_changes,
)
from tritonforge.search.loop import Optimizer
from tritonforge.store import RunStore
from tritonforge.tasks.loader import task_from_file
from tritonforge.verify.policy import check_source

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
ORIGINAL = EXAMPLE.read_text()
CANDIDATE = ORIGINAL.replace("BLOCK_SIZE = 4\n", "BLOCK_SIZE = 64\n").replace(
    "BLOCK_SIZE=BLOCK_SIZE)", "BLOCK_SIZE=BLOCK_SIZE, num_warps=2)")

HOST = '''
def pick(n, scale=1):
    # which version ran
    which = "original"
    return which
'''


def test_the_differing_host_lines_are_found_with_their_function_and_arguments():
    changes = statement_changes(ORIGINAL, CANDIDATE)
    assert [c.function for c in changes] == ["sin_triton", "sin_triton"]
    assert changes[0].params == ("x",)
    assert changes[0].original == "BLOCK_SIZE = 4" and changes[0].candidate == "BLOCK_SIZE = 64"
    assert "num_warps=2" in changes[1].candidate and "num_warps" not in changes[1].original


@pytest.mark.parametrize("candidate, why", [
    (ORIGINAL, "the same"),
    (ORIGINAL.replace("tl.sin(x)", "tl.cos(x)"), "kernel sin_kernel itself"),
    (ORIGINAL.replace("@triton.jit\n", "@triton.jit(do_not_specialize=[2])\n"), "beyond simple"),
    (ORIGINAL.replace("import torch\n", "import torch\nBIG = 1\n"), "beyond simple"),
    (ORIGINAL + "\nLIMIT = 3\n", "beyond simple"),
])
def test_sources_a_size_test_cannot_join_are_refused_with_the_reason(candidate, why):
    with pytest.raises(NotDispatchable, match=why):
        statement_changes(ORIGINAL, candidate)


def test_a_differing_module_level_line_is_refused():
    with pytest.raises(NotDispatchable, match="module-level"):
        statement_changes("X = 1\n" + HOST, "X = 2\n" + HOST)


def test_the_rule_takes_the_candidate_only_where_it_is_not_slower():
    sizes = {"s": {"n": 1000}, "m": {"n": 10**5}, "l": {"n": 10**7}}
    rule = choose_rule(sizes, {"s": 0.86, "m": 3.0, "l": 4.5})
    assert rule.param == "n" and rule.large and rule.candidate_cases == ("m", "l")
    assert 1000 < rule.threshold <= 10**5
    assert rule.gain == pytest.approx(math.exp((math.log(3.0) + math.log(4.5)) / 3))
    small = choose_rule(sizes, {"s": 2.0, "m": 1.5, "l": 0.7})            # the other way round
    assert not small.large and small.candidate_cases == ("s", "m")
    assert choose_rule(sizes, {"s": 2.0, "m": 0.7, "l": 2.0}).candidate_cases in (("s",), ("l",))
    assert choose_rule(sizes, {"s": 0.9, "m": 0.8, "l": 0.95}) is None   # slower everywhere
    same = {"s": {"n": 5}, "l": {"n": 5}}
    assert choose_rule(same, {"s": 0.5, "l": 2.0}) is None               # no size tells them apart


def test_the_dispatched_file_runs_each_version_on_its_side_of_the_threshold():
    candidate = HOST.replace('which = "original"', 'which = "candidate"')
    changes = statement_changes(HOST, candidate)
    rule = Rule("n", 1000, True, 2.0, ("l",))
    source = dispatch_source(HOST, candidate, changes, rule)
    assert "# which version ran" in source                  # the user's comments survive
    assert "TritonForge size dispatch" in source
    namespace: dict = {}
    exec(compile(source, "dispatched", "exec"), namespace)
    assert namespace["pick"](999) == "original" and namespace["pick"](1000) == "candidate"
    below = dispatch_source(HOST, candidate, changes, Rule("n", 1000, False, 2.0, ("s",)))
    namespace = {}
    exec(compile(below, "dispatched", "exec"), namespace)
    assert namespace["pick"](999) == "candidate" and namespace["pick"](1000) == "original"


def test_the_dispatched_kernel_file_passes_the_source_policy():
    rule = Rule("x", 5000, True, 2.0, ("p",))
    source = dispatch_source(ORIGINAL, CANDIDATE, statement_changes(ORIGINAL, CANDIDATE), rule)
    assert check_source(source, original=ORIGINAL).ok


def test_the_probe_records_each_argument_size_and_a_size_that_varies_is_left_out(tmp_path):
    path = tmp_path / "probe.jsonl"
    candidate = HOST.replace('which = "original"', 'which = "candidate"')
    source = probe_source(HOST, statement_changes(HOST, candidate), path)
    namespace: dict = {}
    exec(compile(source, "probe", "exec"), namespace)
    assert read_probe(path) is None                           # not run yet
    namespace["pick"](7, scale=3)
    assert read_probe(path) == {"n": 7, "scale": 3}
    assert probe_kinds(path) == {"n": {"int"}, "scale": {"int"}}
    namespace["pick"](8, scale=3)                             # n took two sizes in one case
    assert read_probe(path) == {"scale": 3}


SPEC = '''
entry = "sin_triton"
seeds = 1
[[case]]
id = "c"
args = [{ tensor = [257] }]
[[case]]
id = "small"
role = "performance"
args = [{ tensor = [96] }]
[[case]]
id = "large"
role = "performance"
args = [{ tensor = [1000] }]
'''


def _dispatch_through_the_loop(tmp_path, candidate: str, description: str, spy=None):
    """The optimizer's size dispatch of ``candidate`` against sin_block4, as if the final check
    had found it 0.77x on the small case and 2.5x on the large one; (decision, joined, notes).
    ``spy(optimizer)``, if given, runs before the dispatch (to watch its requests)."""
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    task = task_from_file(EXAMPLE, spec)
    settings = Settings(device="cpu", case_timeout_s=120, run_dir=str(tmp_path / "run"))
    original = Candidate(ORIGINAL, "original")
    cand = Candidate(candidate, "rules", original.hash, description)
    vetoed_by = Decision(cand.hash, False, 1.5, 1.4, 1.2, 1.3, "case small is 30% slower",
                         (("small", 0.77), ("large", 2.5)))
    notes: list[str] = []
    with RunStore(tmp_path / "store.sqlite") as store:
        ev = Evaluator(settings, tmp_path / "w0", store, device="cpu")
        try:
            opt = Optimizer(task, settings, [ev], [], store)
            if spy is not None:
                spy(opt.final_check)
            decision, joined = opt.final_check._emit_dispatch(task, original, cand, vetoed_by, notes)
        finally:
            ev.close()
    return decision, joined, notes


def test_the_loop_probes_each_case_in_the_worker_and_checks_the_joined_file(tmp_path):
    """Through the interpreter: the probes run in the worker, the rule follows the per-case
    speedups given, and the joined file passes the final check (by correctness on the CPU)."""
    decision, joined, notes = _dispatch_through_the_loop(tmp_path, CANDIDATE, "BLOCK_SIZE 4 -> 64")
    assert decision is not None and decision.accepted, notes
    assert joined.origin == "emit:size_dispatch"
    tests = re.findall(r"_tf_candidate_config = x.numel\(\) >= (\d+)", joined.source)
    assert "def _tf_size" not in joined.source               # a tensor each time: no helper
    assert len(tests) == 1 and joined.source.count("if _tf_candidate_config:") == 2
    threshold = int(tests[0])
    assert 96 < threshold <= 1000                            # small keeps BLOCK_SIZE 4
    assert "kept" in notes[-1]


def test_every_case_is_probed_with_one_source_and_the_joined_files_worker_starts_first(tmp_path):
    """One probe source for all cases, so the worker imports it once (a source per case was a
    new module, 3-4 s of first launch each on the H100); the fresh worker of the joined file's
    final check is asked to start before the probes, which run untimed."""
    probes: list[tuple[str, tuple[str, ...]]] = []
    events: list[str] = []

    class Fresh:
        """make_final_evaluator with a prestart, as PrestartedEvaluators has."""

        def __init__(self, opt):
            self.opt = opt

        def prestart(self):
            events.append("prestart")

        def __call__(self):
            events.append("final")
            return self.opt.timer

    def spy(opt):
        evaluate = opt.timer.evaluate

        def watched(task, variants, **kwargs):
            if kwargs.get("purpose") == "dispatch-probe":
                events.append("probe")
                probes.append((variants[0].source, tuple(kwargs["case_ids"])))
            return evaluate(task, variants, **kwargs)

        opt.timer.evaluate = watched
        opt.make_final_evaluator = Fresh(opt)

    decision, joined, notes = _dispatch_through_the_loop(tmp_path, CANDIDATE, "BLOCK_SIZE 4 -> 64",
                                                         spy=spy)
    assert decision is not None and decision.accepted, notes
    assert [ids for _, ids in probes] == [("small",), ("large",)]
    assert len({source for source, _ in probes}) == 1
    assert events == ["prestart", "probe", "probe", "final"]


def test_a_kernel_body_change_goes_through_the_loops_dispatch_and_final_check(tmp_path):
    """The same path for a candidate that changes the kernel (an equivalent body, as a real
    transform writes it): the twin kernel is launched above the threshold, and the joined file is
    verified against the original on every case."""
    body = ORIGINAL.replace("x = tl.load(x_ptr + offsets, mask=mask)",
                            "x = tl.load(x_ptr + offsets, mask=mask, eviction_policy='evict_first')")
    decision, joined, notes = _dispatch_through_the_loop(tmp_path, body, "evict_first on streamed loads")
    assert decision is not None and decision.accepted, notes
    assert "def sin_kernel__tf_candidate(" in joined.source
    assert "eviction_policy='evict_first'" in joined.source.split("def sin_kernel__tf_candidate(")[1]
    assert joined.source.count("if _tf_candidate_config:") == 1
    assert "sin_kernel__tf_candidate[grid]" in joined.source


def test_every_differing_line_follows_one_test_taken_where_the_function_starts():
    """A mixed pair (one line from each version) was never verified: a function that rebinds
    its argument between the lines must not split them."""
    original = 'def pick(n):\n    """Doc."""\n    a = 1\n    n = n * 1000\n    b = 1\n    return (a, b)\n'
    candidate = original.replace("a = 1", "a = 2").replace("b = 1", "b = 2")
    source = dispatch_source(original, candidate, statement_changes(original, candidate),
                             Rule("n", 1000, True, 2.0, ("l",)))
    namespace: dict = {}
    exec(compile(source, "dispatched", "exec"), namespace)
    assert namespace["pick"](999) == (1, 1) and namespace["pick"](1000) == (2, 2)
    assert namespace["pick"].__doc__ == "Doc."                 # the test goes after the docstring


def test_the_size_test_reads_like_hand_written_code_when_the_argument_kind_is_known():
    assert size_expression("x", {"tensor"}) == "x.numel()"
    assert size_expression("n", {"int"}) == "n"
    assert size_expression("v", {"tensor", "int"}) == "_tf_size(v)"
    candidate = HOST.replace('which = "original"', 'which = "candidate"')
    source = dispatch_source(HOST, candidate, statement_changes(HOST, candidate),
                             Rule("n", 1000, True, 2.0, ("l",)), "n")
    assert "_tf_candidate_config = n >= 1000" in source and "def _tf_size" not in source
    namespace: dict = {}
    exec(compile(source, "dispatched", "exec"), namespace)
    assert namespace["pick"](999) == "original" and namespace["pick"](1000) == "candidate"


def test_the_size_test_goes_into_the_launching_function_even_when_another_has_its_name():
    original = ("class A:\n    def forward(self, n): return 0\n\n"
                "class B:\n    def forward(self, n):\n        v = 1\n        return v\n")
    candidate = original.replace("v = 1", "v = 2")
    changes = statement_changes(original, candidate)
    source = dispatch_source(original, candidate, changes, Rule("n", 10, True, 2.0, ("l",)), "n")
    namespace: dict = {}
    exec(compile(source, "dispatched", "exec"), namespace)
    assert namespace["A"]().forward(100) == 0                 # untouched
    assert namespace["B"]().forward(9) == 1 and namespace["B"]().forward(10) == 2


# A candidate that changes the kernel itself (here, observably: +1, so the test sees which ran;
# a real candidate computes the same values and the final check verifies it on every case)
BODY = ORIGINAL.replace("tl.store(out_ptr + offsets, tl.sin(x), mask=mask)",
                        "tl.store(out_ptr + offsets, tl.sin(x) + 1.0, mask=mask)")


def _load(source: str, tmp_path, name: str):
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_kernel_body_change_is_kept_as_a_twin_kernel_and_each_size_runs_its_version(tmp_path):
    import torch

    from tritonforge.search.dispatch import TWIN_SUFFIX, twin_kernels

    base, other = twin_kernels(ORIGINAL, BODY)
    twin = "sin_kernel" + TWIN_SUFFIX
    assert base.count(f"def {twin}(") == 1 and other.count(f"def {twin}(") == 1
    assert f"{twin}[grid]" in other and f"{twin}[grid]" not in base
    changes = statement_changes(base, other)                  # only the launch differs now
    assert len(changes) == 1 and changes[0].function == "sin_triton"
    source = dispatch_source(base, other, changes, Rule("x", 1000, True, 2.0, ("l",)))
    assert check_source(source, original=ORIGINAL).ok
    module = _load(source, tmp_path, "twin_dispatched")
    small, large = torch.rand(999), torch.rand(1000)
    torch.testing.assert_close(module.sin_triton(small), torch.sin(small))
    torch.testing.assert_close(module.sin_triton(large), torch.sin(large) + 1.0)
    # the probe file (the original plus the unused twin) still computes the original
    probe = _load(probe_source(base, changes, tmp_path / "p.jsonl"), tmp_path, "twin_probe")
    torch.testing.assert_close(probe.sin_triton(large), torch.sin(large))
    assert read_probe(tmp_path / "p.jsonl") == {"x": 1000}


def test_host_only_changes_pass_through_the_twin_step_unchanged():
    from tritonforge.search.dispatch import twin_kernels

    assert twin_kernels(ORIGINAL, CANDIDATE) == (ORIGINAL, CANDIDATE)


HELPER = '''
import triton
import triton.language as tl


@triton.jit
def helper(x):
    return x * 2


@triton.jit
def kernel(p, n, B: tl.constexpr):
    o = tl.arange(0, B)
    tl.store(p + o, helper(tl.load(p + o)))


def run(x, kernel_name="k"):
    meta = dict(kernel=1)
    kernel[(1,)](x, x.numel(), B=16)
    return meta
'''


@pytest.mark.parametrize("candidate, why", [
    (HELPER.replace("def run(x, kernel_name", "def run(x, kernel=None, kernel_name"),
     "a parameter is named kernel"),
    (HELPER.replace("tl.store(p + o,", "tl.store(p + o + 0,") + "\nkernel__tf_candidate = None\n",
     "already used"),
    (HELPER.replace("@triton.jit\ndef helper", "def helper"), "different kernels"),
])
def test_a_kernel_change_that_cannot_be_twinned_safely_is_refused(candidate, why):
    from tritonforge.search.dispatch import twin_kernels

    if why == "a parameter is named kernel":
        candidate = candidate.replace("tl.store(p + o,", "tl.store(p + o + 0,")
    with pytest.raises(NotDispatchable, match=why):
        twin_kernels(HELPER, candidate)


def test_a_changed_helper_twins_the_kernels_that_call_it(tmp_path):
    import torch

    from tritonforge.search.dispatch import TWIN_SUFFIX, twin_kernels

    candidate = HELPER.replace("return x * 2", "return x * 2 + 1")       # observable, as above
    base, other = twin_kernels(HELPER, candidate)
    assert f"def helper{TWIN_SUFFIX}(" in other and f"def kernel{TWIN_SUFFIX}(" in other
    assert f"helper{TWIN_SUFFIX}(tl.load" in other                       # the twin calls the twin
    assert "dict(kernel=1)" in other                                      # keywords keep their names
    changes = statement_changes(base, other)
    source = dispatch_source(base, other, changes, Rule("x", 100, True, 2.0, ("l",)))
    module = _load(source, tmp_path, "twin_helper")
    small, large = torch.ones(16), torch.ones(100)
    module.run(small)
    module.run(large)
    assert small.tolist() == [2.0] * 16                                   # the original kernel
    assert large[:16].tolist() == [3.0] * 16                              # the twins
