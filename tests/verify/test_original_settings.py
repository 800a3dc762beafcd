"""What an original sets when it is imported is how it runs (runtime.worker_evaluate): the
integrity baseline is taken once the reference is imported, so a candidate that carries the same
module-level setting is not a "patched" cheat, and the original's setting is not undone."""

from __future__ import annotations

import torch
from worker_runs import EXAMPLE, SIN_HONEST, SIN_SPEC, time_wrappers

from tritonforge.model import Status

HONEST = SIN_HONEST


def test_an_originals_module_level_setting_is_not_charged_to_its_candidates(tmp_path):
    flag = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    setting = ("\ntorch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = "
               f"{not flag}\n")
    source = EXAMPLE.read_text().replace("import triton.language as tl\n",
                                         "import triton.language as tl\n" + setting, 1)
    assert setting in source
    try:
        ev = time_wrappers(tmp_path, source, SIN_SPEC, "sin_triton", {"honest": HONEST},
                           name="sin_flagged")
    finally:
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = flag
    assert ev.result("honest").status is Status.OK, ev.result("honest")
    assert ev.result("original").status is Status.OK
