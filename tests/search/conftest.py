import os
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

SIN_EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
# the bundled sin example with one small correctness case and one performance case
SIN_SPEC = '''
entry = "sin_triton"
seeds = 1
[[case]]
id = "c"
args = [{ tensor = [257] }]
[[case]]
id = "p"
role = "performance"
args = [{ tensor = [1024] }]
'''


@pytest.fixture()
def sin_task(tmp_path):
    from tritonforge.tasks.loader import task_from_file

    spec = tmp_path / "spec.toml"
    spec.write_text(SIN_SPEC)
    return task_from_file(SIN_EXAMPLE, spec)

