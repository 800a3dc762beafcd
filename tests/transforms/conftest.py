"""Transform tests run rewritten kernels through Triton's interpreter on the CPU.

TRITON_INTERPRET must be set before triton is imported. Kernels are loaded from a file written
to a temporary directory (``@triton.jit`` reads its source with ``inspect.getsource``).
Autotuned kernels need a ``do_bench`` under the interpreter; the transforms keep their output
clean for the GPU, so the ``fake_bench`` fixture (tests/conftest.py, with ``load``) patches
Triton's autotuner instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(Path(__file__).parent))

