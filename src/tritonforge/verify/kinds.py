"""The names of the ways a candidate can be rejected: mismatch kinds and cheat kinds.

Both are ``str`` enums, so ``Mismatch.kind == MismatchKind.NORM`` and ``Mismatch.kind == "norm"``
are the same test; the model keeps plain strings so that stored results stay readable.
"""

from __future__ import annotations

import enum


class MismatchKind(str, enum.Enum):
    """Why one output of one case differs from the original's."""

    VALUE = "value"                  # elements outside atol + rtol*|o|
    NORM = "norm"                    # every element within tolerance, but ||c-o||/||o|| is not
    NAN = "nan"                      # NaN/Inf where the original has none (or the reverse)
    UNWRITTEN = "unwritten"          # the candidate holds the poison value; the original does not
    INPUT_MUTATED = "input_mutated"  # the candidate wrote an argument the original leaves alone
    SHAPE = "shape"
    DTYPE = "dtype"
    DEVICE = "device"
    STRIDE = "stride"                # same values, another memory layout
    TYPE = "type"                    # another Python type (tensor vs None, tuple vs list, ...)
    MISSING = "missing"              # a key, item or output the other side lacks


class CheatKind(str, enum.Enum):
    """Why a candidate is refused even where (or before) its values match."""

    NO_LAUNCH = "no_launch"          # a call launched no Triton kernel where the original did
    LIBRARY_OP = "library_op"        # it handed work to a torch op (or numpy) the original never uses
    SIDE_STREAM = "side_stream"      # it created a stream or launched on a stream not the caller's
    RACE = "race"                    # outputs changed after the call returned, or after inputs did
    RERUN = "rerun"                  # right on the checked cases, wrong on fresh inputs in a new order
    STALE_OUTPUT = "stale_output"    # it returned what an earlier call should have returned
    PATCHED = "patched"              # it changed torch/triton/time attributes or global settings
    POLICY = "policy"                # the static source policy refused it (used by callers)
    WATCHED = "watched"              # right under the guards, wrong on the bare (timed, shipped) path
    ALIASED = "aliased"              # returns memory shared with an input, module state or an
                                     # earlier call's result, where the original's does not
    SUBCLASS = "subclass"            # returns a tensor subclass where the original returns plain
    STATEFUL = "stateful"            # results do not follow inputs changed between calls (a cache)
    CALL_STATE = "call_state"        # changes its module's state on every call (a counter, a log)


# the verifier's note on a case where the original turns finite inputs into NaN/Inf
# (verify.nonfinite; testgen.validate drops such a generated case)
NONFINITE_NOTE = "the original's result holds non-finite values from finite inputs"
