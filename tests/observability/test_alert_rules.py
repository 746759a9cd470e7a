"""deploy/prometheus/osmo-alerts.yaml: valid for Prometheus (`promtool check rules`), and each
alert fires on the series that mean trouble and only after its `for` (`promtool test rules`,
tests/observability/alerts_test.yaml)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .prometheus import binary

HERE = Path(__file__).resolve().parent
RULES = HERE.parents[1] / "deploy" / "prometheus" / "osmo-alerts.yaml"


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary("promtool"), *args], cwd=HERE, capture_output=True,
                          text=True, timeout=120)


def test_the_rules_pass_promtool_check():
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 6 rules found" in result.stdout


def test_the_alerts_fire_when_and_only_when_they_should():
    result = promtool("test", "rules", "alerts_test.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
