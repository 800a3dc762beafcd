"""JSON round-trip for the model's dataclasses (the store's and the report's stable format).

Every dataclass is written as an object tagged with ``"__type__"``; enums as their value tagged
with their class; tuples as lists. ``from_jsonable`` rebuilds the exact objects, so a run store
read back after a crash yields the same Tasks, Evaluations and Decisions that were written.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any

_REGISTRY: dict[str, type] = {}


def register(*classes: type) -> None:
    for cls in classes:
        _REGISTRY[cls.__name__] = cls


def _float(x: float) -> Any:
    if math.isnan(x):
        return {"__float__": "nan"}
    if math.isinf(x):
        return {"__float__": "inf" if x > 0 else "-inf"}
    return x


def to_jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {"__type__": type(obj).__name__}
        for f in dataclasses.fields(obj):
            out[f.name] = to_jsonable(getattr(obj, f.name))
        return out
    if isinstance(obj, enum.Enum):
        return {"__enum__": type(obj).__name__, "value": obj.value}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, float):
        return _float(obj)
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return repr(obj)


def from_jsonable(data: Any) -> Any:
    if isinstance(data, list):
        return tuple(from_jsonable(v) for v in data)
    if isinstance(data, dict):
        if "__float__" in data:
            return float(data["__float__"])
        if "__enum__" in data:
            return _REGISTRY[data["__enum__"]](data["value"])
        if "__type__" in data:
            cls = _REGISTRY[data["__type__"]]
            names = {f.name for f in dataclasses.fields(cls)}
            kwargs = {k: from_jsonable(v) for k, v in data.items() if k in names}
            return cls(**kwargs)
        return {k: from_jsonable(v) for k, v in data.items()}
    return data


def dumps(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), sort_keys=True)


def loads(text: str) -> Any:
    return from_jsonable(json.loads(text))
