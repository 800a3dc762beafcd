"""Testgen tests run kernels through Triton's interpreter on the CPU (set before triton loads)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
