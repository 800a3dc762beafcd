"""The value varieties reach values the spec's cases never draw: a candidate that computes only
where |x| < 32 (randn of unit scale never goes there) passes the spec's own cases and is
rejected on the generated "large magnitudes" case. The spec of the bundled sin_block4 has a
one-element case, traced as a constant fill: the varieties must grow from another call, and a
constant float fill is scaled too. CPU interpreter."""

from pathlib import Path

import pytest

from tritonforge.config import Settings
from tritonforge.model import TensorSpec, Variant, content_hash
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.tasks.loader import task_from_file
from tritonforge.testgen.augment import generated_cases
from tritonforge.testgen.cases import vary

EXAMPLES = Path(__file__).resolve().parents[2] / "src/tritonforge/examples"

CHEAT = ("tl.store(out_ptr + offsets, tl.sin(x), mask=mask)",
         "tl.store(out_ptr + offsets, tl.where(tl.abs(x) < 32.0, tl.sin(x), 0.0), mask=mask)")


def test_a_constant_float_fill_is_scaled_by_the_magnitude_varieties():
    full = TensorSpec((1,), "float32", init="full", value=1.5)
    assert vary(full, "large").value == 1500.0 and vary(full, "tiny").value == pytest.approx(1.5e-3)
    assert vary(TensorSpec((4,), "int32", init="full", value=3), "large").value == 3
    assert vary(TensorSpec((4,), "float32", init="full", value=0.0), "large").value == 0.0


@pytest.mark.slow
def test_a_candidate_wrong_beyond_the_drawn_range_fails_the_generated_large_case(tmp_path):
    source = (EXAMPLES / "sin_block4.py").read_text()
    assert CHEAT[0] in source
    cheat_src = source.replace(*CHEAT)
    settings = Settings(device="cpu", run_dir=str(tmp_path)).replace(generated_cases="on")
    task = task_from_file(EXAMPLES / "sin_block4.py", EXAMPLES / "sin_block4.toml")
    made = generated_cases(task, settings, tmp_path / "gen").task
    large = [c for c in made.cases if c.generated and c.id.endswith("var-large")]
    assert large, [c.id for c in made.cases]
    arg = large[0].recipe.args[0]
    assert arg.shape != (1,) and (arg.scale >= 1e3 or abs(arg.value or 0) >= 32)
    cheat = Variant("cheat", cheat_src, content_hash(cheat_src))
    own = tuple(c.id for c in task.correctness_cases)
    with Evaluator(settings, tmp_path / "eval", store=None, device="cpu") as ev:
        # the spec's values alone: the bare-call probe (second pass) scales one element by
        # 4x + 0.5, past 32 in under 1% of runs on the "odd" case (randn x 3), and then
        # rightly catches the cheat (a fresh-clone CI run, 2026-11-27)
        on_own = ev.evaluate(made, (original_variant(made), cheat), purpose="test", case_ids=own,
                             verify=True, time=False, keep_going=True, use_store=False,
                             second_pass=False)
        on_large = ev.evaluate(made, (original_variant(made), cheat), purpose="test",
                               case_ids=(large[0].id,), verify=True, time=False, keep_going=True,
                               use_store=False)
    assert on_own.result("cheat").verdict.passed          # the spec's cases cannot see it
    assert not on_large.result("cheat").verdict.passed
