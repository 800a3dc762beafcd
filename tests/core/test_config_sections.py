"""Settings by concern: each section is a frozen view of the flat fields, a config file may write
a section as a TOML table, and the environment and flags still win over the file."""

from dataclasses import FrozenInstanceError, fields

import pytest

from tritonforge.config import SECTIONS, Settings, flat_field, load_settings
from tritonforge.errors import ConfigError


def test_every_section_field_views_one_settings_field_and_none_twice():
    flat = {f.name for f in fields(Settings)}
    seen = []
    for section, kind in SECTIONS.items():
        for f in fields(kind):
            assert flat_field(section, f.name) in flat, (section, f.name)
            seen.append(flat_field(section, f.name))
    assert len(seen) == len(set(seen))


def test_sections_read_the_settings_they_view():
    s = Settings(timing_rounds=7, flush_mode="write", llm_model="m", max_rounds=3, seeds=5,
                 gpu_lock="/tmp/l")
    assert s.timing.rounds == 7 and s.timing.flush_mode == "write"
    assert s.llm.model == "m" and s.search.max_rounds == 3 and s.verification.seeds == 5
    assert s.sharing.gpu_lock == "/tmp/l"
    with pytest.raises(FrozenInstanceError):
        s.timing.rounds = 1          # type: ignore[misc]


def test_a_config_file_may_write_sections_and_env_then_flags_win(tmp_path):
    cfg = tmp_path / "tf.toml"
    cfg.write_text("seeds = 4\n[timing]\nrounds = 12\nflush_mode = 'write'\n"
                   "[llm]\nmodel = 'from-file'\n[sharing]\nncu_lock = 'exclusive'\n")
    s = load_settings(cfg, env={})
    assert (s.timing_rounds, s.flush_mode, s.llm_model, s.ncu_lock, s.seeds) == \
        (12, "write", "from-file", "exclusive", 4)
    s = load_settings(cfg, env={"TRITONFORGE_TIMING_ROUNDS": "20", "TRITONFORGE_LLM_MODEL": "env"})
    assert s.timing.rounds == 20 and s.llm.model == "env"
    s = load_settings(cfg, env={"TRITONFORGE_TIMING_ROUNDS": "20"}, overrides={"timing_rounds": 30})
    assert s.timing.rounds == 30


def test_an_unknown_key_in_a_section_names_the_section_and_what_it_holds(tmp_path):
    cfg = tmp_path / "tf.toml"
    cfg.write_text("[timing]\nround = 3\n")
    with pytest.raises(ConfigError, match=r"'round' in section \[timing\]") as err:
        load_settings(cfg, env={})
    assert "rounds" in str(err.value.hint)
