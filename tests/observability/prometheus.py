"""A real Prometheus server (Debian's ``prometheus`` package) for the metrics tests, started
like the suite's PostgreSQL: its own folder, a free port, stopped at the end. Missing, the tests
skip and say why — except under CI, where it is an error (``.ci/run`` installs it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from osmo.embedded import free_port


def binary(name: str = "prometheus") -> str:
    path = shutil.which(name)
    if path is None:
        message = (f"needs Debian's `prometheus` package ({name}); `make test` installs it as "
                   "root")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " — CI must have it (.ci/run installs it)")
        pytest.skip(message)
    return path


class Prometheus:
    """``prometheus`` scraping ``target`` (host:port) every second with ``token``."""

    def __init__(self, directory: Path, target: str, token: str):
        self.directory = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                  "scrape_configs": [{"job_name": "osmo", "metrics_path": "/metrics",
                                      "authorization": {"credentials": token},
                                      "static_configs": [{"targets": [target]}]}]}
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = (directory / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [binary(), f"--config.file={directory / 'prometheus.yml'}",
             f"--storage.tsdb.path={directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:  # noqa: S310
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert self.process.poll() is None, (directory / "prometheus.log").read_text()
            assert time.monotonic() < deadline, "Prometheus did not become ready"
            time.sleep(0.2)

    def api(self, path: str, **params) -> dict:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310
                body = json.loads(answer.read())
        except urllib.error.HTTPError as error:  # a bad query answers 400 with its reason
            body = json.loads(error.read())
        return body

    def query(self, expr: str) -> list[dict]:
        """An instant query's vector; a PromQL error fails the test with Prometheus' reason."""
        body = self.api("query", query=expr)
        assert body["status"] == "success", (expr, body.get("error"))
        return body["data"]["result"]

    def value(self, expr: str) -> float | None:
        """The one value ``expr`` returns now (None: no series)."""
        result = self.query(expr)
        assert len(result) <= 1, (expr, result)
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, expr: str, expected: float, timeout: float = 30) -> float | None:
        """Until ``expr`` returns ``expected`` (scrapes are every second); the last value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.value(expr)
            if value == expected or time.monotonic() > deadline:
                return value
            time.sleep(0.5)

    def targets_up(self) -> bool:
        active = self.api("targets")["data"]["activeTargets"]
        return bool(active) and all(target["health"] == "up" for target in active)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.log.close()
