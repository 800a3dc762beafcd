"""The GPU lock an ncu run takes among shards: shared unless $TRITONFORGE_NCU_LOCK says exclusive."""

import pytest

from tritonforge.errors import ConfigError
from tritonforge.profile.session import NCU_LOCK_ENV, ncu_lock_mode


def test_shared_by_default(monkeypatch):
    monkeypatch.delenv(NCU_LOCK_ENV, raising=False)
    assert ncu_lock_mode() == "shared"
    monkeypatch.setenv(NCU_LOCK_ENV, "")
    assert ncu_lock_mode() == "shared"


def test_exclusive_when_asked(monkeypatch):
    monkeypatch.setenv(NCU_LOCK_ENV, " Exclusive ")
    assert ncu_lock_mode() == "exclusive"
    monkeypatch.setenv(NCU_LOCK_ENV, "shared")
    assert ncu_lock_mode() == "shared"


def test_anything_else_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(NCU_LOCK_ENV, "none")
    with pytest.raises(ConfigError) as err:
        ncu_lock_mode()
    assert "TRITONFORGE_NCU_LOCK" in str(err.value) and "exclusive" in str(err.value)


def test_the_suite_refuses_a_bad_value_before_any_record(monkeypatch, tmp_path):
    from tritonforge.cli import main

    monkeypatch.setenv(NCU_LOCK_ENV, "bogus")
    code = main(["bench", "optimize", "--names", "add_example", "--run-dir", str(tmp_path),
                 "--device", "cpu"])
    assert code == 2
    assert not any(tmp_path.iterdir())       # no store, no record started
