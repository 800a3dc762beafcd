"""Task tests run kernels through Triton's interpreter on the CPU (set before triton loads)."""

import os
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).parent))
