"""Shared paths for the profile tests (nothing here runs a kernel, so no TRITON_INTERPRET)."""

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
