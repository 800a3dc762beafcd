"""What a candidate can see of its own module is the same in every request of the worker
(runtime.loader): verified or timed, original or candidate. Named by its label, a kernel read
``JITFunction(tf_<task>_<variant>_verify_<hash>:k)`` in a verification and ``..._short_...``
when timed, and a candidate could compute the right thing exactly when it was verified. The
static policy allows every probe below."""

from __future__ import annotations

import re
import sys
import warnings

from tritonforge.runtime.loader import import_source, module_key
from tritonforge.runtime.worker_evaluate import module_label
from tritonforge.verify.policy import check_source

SOURCE = '''
import logging
import warnings

import triton
import triton.language as tl

log = logging.getLogger(__name__)


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass


class Holder:
    pass


def seen():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("where am I")
    return (repr(k), str(k), getattr(k, "module", None), repr(Holder), type(Holder()).__qualname__,
            repr(Holder()).split(" object")[0], log.name, caught[0].filename,
            log.findCaller()[0])
'''


def test_every_probe_is_allowed_by_the_static_policy():
    assert check_source(SOURCE).ok


def test_a_module_looks_the_same_under_every_label(tmp_path):
    labels = [module_label("my_task", variant, mode)
              for variant in ("original", "c3") for mode in ("quick", "short", "full", "compile")]
    modules = [import_source(tmp_path, label, SOURCE, shown_as="my_task") for label in labels]
    assert len({module_key(m) for m in modules}) == len(labels)        # one module per label
    assert all(sys.modules[module_key(m)] is m for m in modules)
    seen = {tuple(re.sub(r" at 0x[0-9a-f]+", "", str(part)) for part in m.seen())
            for m in modules}                 # an object's address is no module's name
    assert len(seen) == 1, seen
    shown = seen.pop()
    assert "my_task" in shown[3] and not any("tf_" in str(part) or "verify" in str(part)
                                              for part in shown)


def test_without_shown_as_the_label_names_the_module(tmp_path):
    m = import_source(tmp_path, "plain", "x = 1\n")
    assert m.__name__ == module_key(m) and m.__name__.startswith("tf_plain_")


def test_a_task_name_that_is_no_identifier_still_names_a_module(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = import_source(tmp_path, "9-lives.v2", "x = 1\n", shown_as="9-lives.v2")
    assert m.__name__.isidentifier() and m.x == 1
