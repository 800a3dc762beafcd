"""TritonForge: profiling-guided, verified optimization of Triton GPU kernels.

The public facade is ``tritonforge.api``; everything else is private and may change.
"""

__version__ = "0.1.0"
