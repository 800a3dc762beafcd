"""Frozen dataclasses passed between TritonForge's parts (no dicts with string keys as interfaces)."""

from .evaluation import (
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
