"""The machine's settings (GPU lock, ncu lock, progress log, data and tool paths) are Settings
fields read from their TRITONFORGE_* variables by config.py alone, with flags over the
environment, and the parts that read them see the environment through ``env_settings``."""

import ast
from pathlib import Path

import pytest

from tritonforge.config import Settings, env_settings, load_settings
from tritonforge.errors import ConfigError

SRC = Path(__file__).resolve().parents[2] / "src" / "tritonforge"

ENV = {"TRITONFORGE_GPU_LOCK": "/tmp/g.lock", "TRITONFORGE_GPU_LOCK_SCOPE": " All ",
       "TRITONFORGE_NCU_LOCK": "exclusive", "TRITONFORGE_PROGRESS_LOG": "/tmp/p.log",
       "TRITONFORGE_TRITONBENCH": "/data/tb", "TRITONFORGE_NCU": "/opt/ncu",
       "TRITONFORGE_CACHE_DIR": "/tmp/c"}


def test_the_variables_keep_their_names_and_flags_win(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings(env=ENV)
    assert (s.gpu_lock, s.gpu_lock_scope, s.ncu_lock, s.progress_log, s.tritonbench, s.ncu,
            s.cache_dir) == ("/tmp/g.lock", "all", "exclusive", "/tmp/p.log", "/data/tb",
                             "/opt/ncu", "/tmp/c")
    s = load_settings(env=ENV, overrides={"ncu_lock": "shared", "gpu_lock": ""})
    assert s.ncu_lock == "shared" and s.gpu_lock == ""
    d = load_settings(env={})
    assert (d.gpu_lock, d.gpu_lock_scope, d.ncu_lock) == ("", "timing", "shared") and d == Settings()


def test_a_bad_lock_mode_names_the_variable_and_the_choices(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="TRITONFORGE_NCU_LOCK.*exclusive"):
        load_settings(env={"TRITONFORGE_NCU_LOCK": "none"})
    with pytest.raises(ConfigError, match="TRITONFORGE_GPU_LOCK_SCOPE.*timing or all"):
        load_settings(env={"TRITONFORGE_GPU_LOCK_SCOPE": "some"})


def test_env_settings_sees_the_environment_as_it_is_now(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRITONFORGE_PROGRESS_LOG", str(tmp_path / "a.log"))
    assert env_settings().progress_log == str(tmp_path / "a.log")
    monkeypatch.delenv("TRITONFORGE_PROGRESS_LOG")
    assert env_settings().progress_log == ""


def _tritonforge_names(tree: ast.Module) -> set[str]:
    """Module-level names bound to a TRITONFORGE_* variable's name."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            value = ast.unparse(node.value)
            if "TRITONFORGE_" in value or value.startswith("env_name("):
                names.add(node.targets[0].id)
    return names


def test_no_module_but_config_reads_a_tritonforge_variable():
    """os.environ reads of TRITONFORGE_* names live in config.py. The exceptions are messages
    from a parent process to the child it starts, not settings: the worker's inputs folder, and
    the hook a test hands to a bench lane process."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "config.py":
            continue
        tree = ast.parse(path.read_text())
        bound = _tritonforge_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("get", "getenv") and node.args \
                    and ast.unparse(node.func.value) in ("os.environ", "os"):
                arg = node.args[0]
                if ("TRITONFORGE_" in ast.unparse(arg)
                        or isinstance(arg, ast.Name) and arg.id in bound):
                    offenders.append(f"{path.relative_to(SRC)}: {ast.unparse(node)}")
    assert sorted(offenders) == ["bench/lane.py: os.environ.get(TEST_HOOK_ENV)",
                                 "runtime/perf_inputs.py: os.environ.get(ENV_DIR)"], offenders
