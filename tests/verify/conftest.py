"""Verify tests run Triton kernels through the interpreter on CPU tensors (set before triton loads)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
