"""Settings: the commented example file is the code's defaults; errors name key and line."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from mailfilter.config import ConfigError, Settings, load_settings, parse_duration

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "dupfilter.toml"


def test_example_file_parses_and_equals_the_defaults() -> None:
    from_file = asdict(load_settings(EXAMPLE))
    defaults = asdict(Settings())
    from_file.pop("source")
    defaults.pop("source")
    assert from_file == defaults


def test_example_file_documents_every_key() -> None:
    text = EXAMPLE.read_text()
    for section, values in asdict(Settings()).items():
        if section == "source":
            continue
        assert f"[{section}]" in text
        for key, value in values.items():
            if isinstance(value, dict):
                for sub in value:
                    assert f"\n{sub.replace('_', '-')} = " in text or f"\n{sub} = " in text
            else:
                assert f"\n{key} = " in text, f"{section}.{key} is not documented"


def test_empty_file_means_defaults(tmp_path: Path) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert asdict(load_settings(empty))["detector"] == asdict(Settings())["detector"]


@pytest.mark.parametrize("content, expected", [
    ("[detector]\nresemblance_treshold = 0.4\n", "2: unknown key detector.resemblance_treshold"),
    ("[detector]\nscope = \"everyone\"\n", "2: detector.scope must be"),
    ("[detector]\nhistogram_candidates = 0\n",
     "2: detector.histogram_candidates must be at least 1"),
    ("[fingerprint]\nngram = \"five\"\n", "2: fingerprint.ngram must be int"),
    ("[milter.actions]\nduplicate = \"explode\"\n", "2: milter.actions.duplicate must be one of"),
    ("[store]\nretention = \"forever\"\n", "2: store.retention"),
    ("[detector\n", "Expected"),
    ("[policy]\nrules = [{ field = \"subject\", pattern = \"x\" }]\n",
     "2: policy.rules[1] (rule1): field must be one of"),
    ("[policy]\nrules = [{ field = \"from\", pattern = \"(\" }]\n", "bad pattern"),
    ("[log]\nlevel = \"verbose\"\n", "2: log.level must be one of"),
    ("\n[log]\ntarget = \"stderr\"\nlevel = \"WARNING\"\n[detector]\nscope = 1\n",
     "6: detector.scope must be str"),
])
def test_bad_values_name_the_key_and_line(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(ConfigError) as error:
        load_settings(path)
    assert str(path) in str(error.value) and expected in str(error.value)


def test_durations() -> None:
    assert parse_duration("30d") == 30 * 86400
    assert parse_duration("12h") == 43200
    assert parse_duration("90m") == 5400
    with pytest.raises(ValueError):
        parse_duration("soon")


def test_show_names_where_each_setting_came_from(tmp_path: Path) -> None:
    import subprocess
    config = tmp_path / "site.toml"
    config.write_text('[detector]\nscope = "global"\n\n[milter.actions]\nduplicate = "reject"\n'
                      '\n[smtpd.actions]\nduplicate = "discard"\n')
    shown = subprocess.run(["dupfilter-db", "--config", str(config), "--db", "/tmp/x",
                            "config", "--show"], capture_output=True, text=True).stdout
    assert f'scope = "global"  # {config}:2' in shown
    assert f'actions.duplicate = "reject"  # {config}:5' in shown
    assert f'actions.duplicate = "discard"  # {config}:8' in shown
    assert 'resemblance_threshold = 0.35  # default' in shown
    assert 'path = "/tmp/x"  # --db' in shown


def test_search_order(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from mailfilter.config import find_config
    user = tmp_path / "xdg" / "dupfilter" / "dupfilter.toml"
    user.parent.mkdir(parents=True)
    user.write_text("")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("DUPFILTER_CONFIG", raising=False)
    assert find_config() == user
    monkeypatch.setenv("DUPFILTER_CONFIG", str(tmp_path / "env.toml"))
    assert find_config() == tmp_path / "env.toml"
    assert find_config("explicit.toml") == Path("explicit.toml")


@pytest.mark.parametrize("content, expected", [
    ('[smtpd.actions]\nduplicate = "reject"\n',
     ':2: smtpd.actions.duplicate = "reject" needs smtpd.mode = "proxy"'),
    ('[milter]\nsocket = "/run/dupfilter/milter.sock"\n', ":2: milter.socket"),
    ('[smtpd]\nlisten = "localhost"\n', ":2: smtpd.listen: 'localhost' is not HOST:PORT"),
    ('[smtpd]\nnext_hop = "127.0.0.1:99999"\n', "smtpd.next_hop: port 99999 out of range"),
])
def test_config_check_finds_what_a_daemon_would_refuse(tmp_path: Path, content: str,
                                                       expected: str) -> None:
    """`config --check` must not say "valid" for a file a daemon then refuses to start
    with; the pipe filter, which has no such section to run, still accepts the file."""
    import subprocess
    path = tmp_path / "site.toml"
    path.write_text(content)
    checked = subprocess.run(["dupfilter-db", "--config", str(path), "config", "--check"],
                             capture_output=True, text=True)
    assert checked.returncode == 2 and expected in checked.stderr, checked
    assert "valid" not in checked.stdout
    load_settings(path)                       # still loads: dupfilter --tag keeps working


def test_smtpd_reload_says_a_changed_mode_needs_a_restart(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import argparse
    import logging

    from mailfilter.smtpd.server import _settings_loader
    path = tmp_path / "site.toml"
    path.write_text('[smtpd]\nmode = "proxy"\n')
    running = load_settings(path)
    path.write_text('[smtpd]\nmode = "after-queue"\n')
    args = argparse.Namespace(config=str(path), db=None, listen=None, next_hop=None)
    logger = logging.getLogger("test-smtpd-reload")
    with caplog.at_level(logging.WARNING, logger="test-smtpd-reload"):
        fresh = _settings_loader(args, running, logger)()
    assert fresh.smtpd.mode == "proxy"                      # kept until a restart
    assert "smtpd.mode changed; it takes effect after a restart" in caplog.text
