"""Test doubles for the final check (search.final_check)."""


def bare_final_check(evaluate):
    """A FinalCheck without its constructor: every fresh evaluation answered by ``evaluate``
    (``evaluate(task, variants, *, purpose, **kw)``), no store, no budget, no plan to fit."""
    from types import SimpleNamespace

    from tritonforge.search.arbiter import ArbiterPolicy
    from tritonforge.search.final_check import FinalCheck

    check = FinalCheck.__new__(FinalCheck)
    check.timer = SimpleNamespace(evaluate=evaluate)
    check.make_final_evaluator = None
    check.settings = SimpleNamespace(timing_rep_ms=None)
    check.interpreted = False
    check.policy = ArbiterPolicy()
    check.store = None
    check.budget = None
    check.estimate_s = None
    check.progress = lambda s: None
    check.final_dropped = set()
    return check
