"""Verify tests run Triton kernels through the interpreter on CPU tensors (set before triton loads).

On a GPU machine, ``TRITONFORGE_VERIFY_DEVICE=cuda`` runs the same tests with compiled kernels on
CUDA tensors, and enables the tests marked ``gpu`` (real streams, real races).
"""

import os

DEVICE = os.environ.get("TRITONFORGE_VERIFY_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")
