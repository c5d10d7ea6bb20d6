"""The shipped Prometheus alerting rules (issue 20, item 2): valid for Prometheus (`promtool
check rules`), and each alert fires on the series a daemon exports in the fault it is for,
and not otherwise (`promtool test rules` on tests/data/dupfilter-alerts-test.yml)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "prometheus" / "dupfilter-alerts.yml"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def promtool(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_alerting_rules_are_valid() -> None:
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 5 rules found" in done.stdout


def test_each_alert_fires_in_its_fault() -> None:
    """Redis down (unchecked mail, errors), a store not open, a full disk."""
    done = promtool("test", "rules", "dupfilter-alerts-test.yml", cwd=REPO / "tests" / "data")
    assert done.returncode == 0, done.stdout + done.stderr


def test_rules_name_only_series_the_daemons_export() -> None:
    """Every dupfilter_* series an alert reads is one mailfilter/metrics.py defines."""
    exported = set(re.findall(r'"(dupfilter_[a-z_]+)"', (REPO / "mailfilter" / "metrics.py")
                              .read_text()))
    used = set(re.findall(r"\b(dupfilter_[a-z_]+?)(?:_total)?\b[{\[)\s]", RULES.read_text()))
    assert used and used <= exported, used - exported


def test_operations_guide_explains_every_alert() -> None:
    names = re.findall(r"alert: (\w+)", RULES.read_text())
    guide = (REPO / "docs" / "operations.md").read_text()
    assert names and all(f"`{name}`" in guide for name in names), names
