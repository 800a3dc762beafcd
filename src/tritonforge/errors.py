"""The one exception tree of TritonForge.

Every error a user can cause says what was wrong, where (file and line when there is one) and how
to fix it. The CLI maps each class to an exit code (see ``cli.EXIT_CODES``).

    TritonForgeError
    ├── InputError                 bad input from the user: exit 2
    │   ├── SourceFileError        missing/unreadable file, syntax error, no @triton.jit kernel
    │   ├── EntryPointError        the named entry function does not exist
    │   ├── SpecError              a case spec that cannot be read or yields no cases
    │   └── UnknownBenchmarkError  a TritonBench-G name not in the data
    ├── ConfigError                a setting with a bad value: exit 2
    ├── EnvironmentProblem         a missing tool or device (ncu, GPU, libcst): exit 3
    ├── WorkerError                the isolated worker could not be started or talked to: exit 4
    ├── StoreError                 the run store is unreadable or from another run: exit 5
    └── TransformError             a source transform that cannot rewrite this source: exit 1

Failures of a *candidate* kernel (compile errors, crashes, hangs, mismatches) are not exceptions
at this level: they are data (``model.Failure``) recorded in the store, and the run goes on.
"""

from __future__ import annotations


class TritonForgeError(Exception):
    """Base of every error TritonForge raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None, location: str | None = None):
        self.message = message
        self.hint = hint
        self.location = location
        super().__init__(self.render())

    def render(self) -> str:
        where = f"{self.location}: " if self.location else ""
        tail = f"\n  hint: {self.hint}" if self.hint else ""
        return f"{where}{self.message}{tail}"


class InputError(TritonForgeError):
    """Bad input from the user (files, names, specs)."""

    exit_code = 2


class SourceFileError(InputError):
    """A kernel source file that is missing, unreadable, not Python, or holds no Triton kernel."""


class EntryPointError(InputError):
    """The entry function named by the user or spec does not exist in the source."""


class SpecError(InputError):
    """A case spec that cannot be parsed, or that yields no cases."""


class UnknownBenchmarkError(InputError):
    """A TritonBench-G kernel name that is not in the data set."""


class ConfigError(TritonForgeError):
    """A setting with an invalid value."""

    exit_code = 2


class EnvironmentProblem(TritonForgeError):
    """Something the machine lacks: a GPU, Nsight Compute, an optional package."""

    exit_code = 3


class WorkerError(TritonForgeError):
    """The isolated worker process could not be started or stopped answering the protocol."""

    exit_code = 4


class StoreError(TritonForgeError):
    """The run store cannot be opened, or belongs to a different run."""

    exit_code = 5


class TransformError(TritonForgeError):
    """A source-to-source transform that does not apply to the given source (the reason says why).

    Raised by ``transforms.<name>.apply``; proposers catch it and skip the candidate.
    """
