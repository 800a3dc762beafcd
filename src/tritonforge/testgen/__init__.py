"""Test generation without an LLM: trace a kernel file's own test, then draw cases from it.

    tritonforge testgen kernel.py [--test example.py] [--entry f] [--out kernel.toml]
    tritonforge run kernel.py --spec kernel.toml

What it does (``generate.generate``; ``api.generate_cases`` wraps it):

1. ``trace``: runs the file's ``test_*`` functions (``pytest.mark.parametrize`` expanded), else its
   ``__main__`` block, else a TritonBench-style test section, or a separate test file, once, in a
   separate process with a timeout (the CPU interpreter and CPU shim when there is no GPU), and
   records every call of the module's functions and every Triton launch under them;
2. ``dims``: names the sizes the calls share (``n_elements == x.numel()``), and says which may
   change (free), which a block size follows, which are tied to constexprs or kept;
3. ``values``: learns how to re-draw each tensor (ranges that keep logs of positives positive,
   indices in range, offsets sorted, outputs zeroed or poisoned as traced);
4. ``cases`` and ``perf``: the traced calls re-drawn, odd shapes (not a power of two, a partial
   last block, one), one case per value and layout variety at sizes that divide no block (large
   and tiny magnitudes, half exact zeros, non-contiguous views: ``cases.VARIETIES``), a large
   odd case, and performance sizes scaled until a call moves 64 MB (GPU: or runs 50 us above
   the overhead floor), with the reason for every size in the spec's comments;
5. ``validate``: the original runs every case in the worker; a case it fails on, or on which two
   of its own runs disagree, or a view it computes differently from contiguous copies of the
   same values (it ignores strides), is dropped with a note;
6. ``render``: the spec file (``tasks.spec`` format) and a summary.

``tritonbench`` runs it on TritonBench-G records with their performance scripts hidden;
``augment`` adds a handful of such cases to any task (a spec's, a record's) before a search.
"""

from .model import (
    Dropped, GeneratedCase, KernelLaunch, Symbol, TensorStats, TestgenResult, Trace, TracedCall,
    TracedSeq, TracedTensor, TracedValue,
)

__all__ = ["Dropped", "GeneratedCase", "KernelLaunch", "Symbol", "TensorStats", "TestgenResult",
           "Trace", "TracedCall", "TracedSeq", "TracedTensor", "TracedValue"]
