"""A result cache keyed on the input's identity and its version counter (reached by a computed
name, past the policy's check of ``._version``): a change torch makes in place bumps the counter
and refills the cache, a kernel's stores do not, and a timing loop on the same input only ever
hits the cache. Caught by the probe, which changes inputs through ``.data`` (a counter of its
own) and finds results that do not follow them (verify.shipped). Where a fresh input gets the id
of a freed one (what ran before in the process decides), the cache serves the old input's result
and the repeated-call checks catch it first (``call_state``, ``stale_output``): a fresh-clone CI
run of the whole suite saw that order, the file alone the probe's."""

import torch
import triton
import triton.language as tl

FAMILY = 'scale'
EXPECT = ('cheat:stateful|call_state|stale_output',)


@triton.jit
def scale_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * a, mask=mask)


def scale(x, a):
    cache = scale.__dict__.setdefault("cache", {})
    key = (id(x), getattr(x, "_" + "version"), a, tuple(x.shape))
    if key not in cache:
        y = torch.empty_like(x)
        n = x.numel()
        scale_kernel[(triton.cdiv(n, 512),)](x, y, a, n, BLOCK=512)
        cache.clear()
        cache[key] = y
    return cache[key].clone()
