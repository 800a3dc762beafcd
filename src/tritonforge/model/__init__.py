"""Frozen dataclasses passed between TritonForge's parts (no dicts with string keys as interfaces)."""

from .evaluation import (
    Cheat,
    DeviceInfo,
    Evaluation,
    Failure,
    Mismatch,
    Status,
    Timing,
    TimingMethod,
    Variant,
    VariantResult,
    Verdict,
)
from .profile import Bound, CompileStats, Diagnosis, Hint, KernelProfile, Metric, Profile, Roofline
from .search import (
    Candidate,
    Decision,
    HardwareInfo,
    HistoryEntry,
    ProposalContext,
    RepairRequest,
)
from .task import (
    ArgValue,
    CapturedCall,
    Case,
    CaseRole,
    PerfScriptCall,
    Recipe,
    SpecCall,
    Task,
    TensorSpec,
    TestSectionCall,
    Tolerance,
    content_hash,
)

__all__ = [name for name in dir() if not name.startswith("_")]

from . import evaluation as _evaluation, profile as _profile, search as _search, task as _task
from .serialize import register as _register

for _mod in (_evaluation, _profile, _search, _task):
    for _obj in vars(_mod).values():
        if isinstance(_obj, type) and _obj.__module__ == _mod.__name__:
            _register(_obj)
