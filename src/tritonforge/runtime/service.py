"""Where the driver-side runtime used to live, kept for imports until they move: the Evaluator is
``runtime.evaluator``, the GPU lock ``runtime.gpu_lock``, timing plans ``runtime.timing_plan``,
the device ``runtime.hardware``."""

from .evaluator import COMPILE_PASS_RUNS, Evaluator, PrestartedEvaluators, original_variant  # noqa: F401
from .gpu_lock import (  # noqa: F401
    GPU_LOCK_ENV, GPU_LOCK_SCOPE_ENV, gpu_blocked_s, gpu_lock, gpu_lock_covers_all, lock_mode,
)
from .hardware import resolve_device  # noqa: F401
from .timing_plan import final_check_plan, timing_plan  # noqa: F401
