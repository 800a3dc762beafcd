"""Test generation without an LLM: trace a kernel file's own test, then draw cases from it.

``generate.generate`` is the entry point (``api.generate_cases`` wraps it); ``trace`` runs the
file's test in a separate process; ``dims`` finds the sizes its calls share; ``values`` learns how
to re-draw each tensor; ``cases`` and ``perf`` build correctness and performance cases;
``validate`` runs the original on them in the worker; ``render`` writes the spec.
"""

from .model import (
    Dropped, GeneratedCase, KernelLaunch, Symbol, TensorStats, TestgenResult, Trace, TracedCall,
    TracedSeq, TracedTensor, TracedValue,
)

__all__ = ["Dropped", "GeneratedCase", "KernelLaunch", "Symbol", "TensorStats", "TestgenResult",
           "Trace", "TracedCall", "TracedSeq", "TracedTensor", "TracedValue"]
