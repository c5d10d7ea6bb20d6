"""SIGHUP's reload, shared by dupfilter-milter and dupfilter-smtpd (mailfilter.service)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mailfilter.config import load_settings
from mailfilter.service import reload_settings


@pytest.fixture
def logger(caplog: pytest.LogCaptureFixture) -> logging.Logger:
    caplog.set_level(logging.DEBUG, logger="test-reload")
    return logging.getLogger("test-reload")


def test_front_end_section_applied_restart_keys_and_sections_kept(
        tmp_path: Path, logger: logging.Logger, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "dupfilter.toml"
    path.write_text('[milter]\nsocket = "inet:8890@127.0.0.1"\n')
    running = load_settings(str(path))
    section = running.milter                      # what the daemon's sessions hold on to
    path.write_text('[milter]\nsocket = "unix:/run/x.sock"\non_error = "tempfail"\n'
                    '[milter.actions]\nduplicate = "reject"\n'
                    '[detector]\nresemblance_threshold = 0.5\n[log]\nlevel = "debug"\n'
                    'target = "syslog"\n')
    assert reload_settings(running, lambda: load_settings(str(path)), "milter",
                           ("socket",), logger)
    assert running.milter is section              # changed in place
    assert section.on_error == "tempfail" and section.actions.duplicate == "reject"
    assert section.socket == "inet:8890@127.0.0.1"   # needs a restart
    assert running.detector.resemblance_threshold == 0.35
    assert logger.level == logging.DEBUG
    text = caplog.text
    assert "milter.socket changed; it takes effect after a restart" in text
    assert "[detector] changed; it takes effect after a restart" in text
    assert "log.target changed; it takes effect after a restart" in text
    assert running.log.target == "stderr"
    assert "configuration reloaded" in text and "duplicate=reject" in text


def test_a_broken_file_keeps_the_running_settings(
        tmp_path: Path, logger: logging.Logger, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "dupfilter.toml"
    path.write_text('[smtpd.actions]\nduplicate = "discard"\n')
    running = load_settings(str(path))
    path.write_text('[smtpd.actions]\nduplicate = "explode"\n')
    assert not reload_settings(running, lambda: load_settings(str(path)), "smtpd",
                               ("listen",), logger)
    assert running.smtpd.actions.duplicate == "discard"
    assert "not reloaded, keeping the running one" in caplog.text
    assert "smtpd.actions.duplicate" in caplog.text     # says which key, as config errors do
