"""deploy/prometheus/osmo-alerts.yaml: valid for Prometheus (`promtool check rules`), and each
alert fires on the series that mean trouble and only after its `for` (`promtool test rules`,
tests/observability/alerts_test.yaml)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from .prometheus import binary

HERE = Path(__file__).resolve().parent
RULES = HERE.parents[1] / "deploy" / "prometheus" / "osmo-alerts.yaml"


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary("promtool"), *args], cwd=HERE, capture_output=True,
                          text=True, timeout=120)


def test_the_rules_pass_promtool_check():
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 8 rules found" in result.stdout


def test_the_alerts_fire_when_and_only_when_they_should():
    result = promtool("test", "rules", "alerts_test.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_test_that_fires_it_and_one_that_keeps_it_quiet():
    rules = yaml.safe_load(RULES.read_text())
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"]
              if "alert" in rule}
    cases = [case for test in yaml.safe_load((HERE / "alerts_test.yaml").read_text())["tests"]
             for case in test.get("alert_rule_test") or []]
    fired = {case["alertname"] for case in cases if case.get("exp_alerts")}
    quiet = {case["alertname"] for case in cases if not case.get("exp_alerts")}
    assert len(alerts) == 8
    assert alerts - fired == set(), f"alerts no promtool test fires: {sorted(alerts - fired)}"
    assert alerts - quiet == set(), f"alerts no promtool test keeps quiet: {alerts - quiet}"
    assert fired | quiet <= alerts  # no test of an alert that is not there
