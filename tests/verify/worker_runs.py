"""Tests' helper: a kernel file's variants evaluated in a CPU worker as the search times them
(verified or not, timed, checked after timing), each variant the file with its entry function
replaced."""

from __future__ import annotations

from pathlib import Path

from tritonforge.config import Settings
from tritonforge.model import Evaluation, Variant
from tritonforge.runtime.evaluator import Evaluator, original_variant
from tritonforge.tasks.loader import task_from_file

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "tritonforge" / "examples" / "sin_block4.py"
# the example's entry on a correctness case and a performance case, one seed each
SIN_SPEC = ('entry = "sin_triton"\nseeds = 1\n[[case]]\nid = "c"\nargs = [{ tensor = [300] }]\n'
            '[[case]]\nid = "p"\nrole = "performance"\nargs = [{ tensor = [400] }]\n')
# an honest wrapper of the example: a wider block, the same sines
SIN_HONEST = '''
def sin_triton(x):
    out = torch.empty_like(x)
    n = x.numel()
    sin_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK_SIZE=64)
    return out
'''


def time_wrappers(root: Path, source: str, spec: str, entry: str, wrappers: dict[str, str],
                  tail: str = "", verify: bool = True, name: str = "kernel") -> Evaluation:
    """The original (``source`` + ``tail``, as ``root/NAME.py``) and one variant per
    ``wrappers`` item: the original's text before ``def ENTRY``, the wrapper, ``tail``."""
    original, spec_path = root / f"{name}.py", root / f"{name}.toml"
    original.write_text(source + tail)
    spec_path.write_text(spec)
    task = task_from_file(original, spec_path)
    head = task.source.split(f"\ndef {entry}")[0]
    variants = (original_variant(task),) + tuple(
        Variant(label, head + wrapper + tail, label) for label, wrapper in wrappers.items())
    with Evaluator(Settings(device="cpu"), root / "w", device="cpu") as ev:
        return ev.evaluate(task, variants, purpose="time", verify=verify, time=True,
                           use_store=False)
