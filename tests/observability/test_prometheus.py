"""A real Prometheus server scrapes a running `osmo standalone` (web, worker, beat and the
scheduler loop in multiprocess mode) and PromQL returns what known actions produced; the
Grafana dashboard's and the alert rules' every expression runs against it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import yaml

from osmo.embedded import free_port
from tests.processes import command_lines

from .prometheus import Prometheus, binary

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "osmo-dashboard.json"
ALERTS = ROOT / "deploy" / "prometheus" / "osmo-alerts.yaml"
SUBMIT_ROUTE = "api/pool/<str:pool>/workflow"


@dataclass
class Stack:
    url: str
    token: str
    prometheus: Prometheus
    log: Path
    process: subprocess.Popen

    def call(self, method: str, path: str, body: dict | None = None,
             headers: dict | None = None) -> tuple[int, dict, dict]:
        request = urllib.request.Request(
            f"{self.url}{path}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}",
                     "Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=20) as answer:  # noqa: S310
                return answer.status, json.loads(answer.read()), dict(answer.headers)
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read()), dict(error.headers)

    def submit(self, pool: str, gpus: int, *, request_id: str | None = None):
        # Tasks of at most 8 GPUs: a pod larger than every node is refused before quota.
        per_task, tasks = min(gpus, 8), -(-gpus // 8)
        assert per_task * tasks == gpus
        entries = "".join(f"    - {{name: t{i}, image: x, command: [sleep, '3600'], "
                          f"resource: r{', lead: true' if i == 0 else ''}}}\n"
                          for i in range(tasks))
        spec = (f"workflow:\n  name: metrics\n  groups:\n  - name: g\n    tasks:\n{entries}"
                f"  resources:\n    r: {{gpu: {per_task}}}\n")
        return self.call("POST", f"/api/pool/{pool}/workflow", {"file": spec},
                         {"X-Request-ID": request_id} if request_id else None)

    def workflows(self) -> list[str]:
        status, body, _ = self.call("GET", "/api/workflow?limit=1000")
        assert status == 200
        return sorted(w["name"] for w in body["results"])


@pytest.fixture(scope="module")
def stack():
    binary()  # skip (or fail under CI) before starting anything
    work = Path(tempfile.mkdtemp(prefix="osmo-metrics-test-"))
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY"}}
    env.update(OSMO_LOG_FORMAT="json", OSMO_USAGE_SAMPLE_INTERVAL="2",
               OSMO_SIM_TASK_SECONDS="0")
    log = work / "standalone.log"
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("osmo")), "standalone", "--port", str(port),
         "--data-dir", str(work / "data"), "--demo", "--web-workers", "2",
         "--verbose"],  # the web tier's log lines on stderr: the test reads them
        stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=env)
    prometheus = None
    try:
        ready = process.stdout.readline().strip()
        assert ready == f"OSMO ready: http://127.0.0.1:{port}/", log.read_text()[-3000:]
        token = process.stdout.readline().strip().removeprefix("token: ")
        (work / "prometheus").mkdir()
        prometheus = Prometheus(work / "prometheus", f"127.0.0.1:{port}", token)
        yield Stack(f"http://127.0.0.1:{port}", token, prometheus, log, process)
    finally:
        if prometheus is not None:
            prometheus.stop()
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        shutil.rmtree(work, ignore_errors=True)


def test_one_scrape_holds_every_process(stack):
    """The web workers, the scheduler loop, beat (tasks sent) and the worker (tasks run)."""
    prom = stack.prometheus
    deadline = time.monotonic() + 30
    while not prom.targets_up():
        assert time.monotonic() < deadline, prom.api("targets")
        time.sleep(0.5)
    assert prom.wait_for('sum(osmo_scheduler_cycles_total{result="success"}) > bool 0', 1) == 1
    assert prom.wait_for('sum(osmo_background_tasks_sent_total'
                         '{task="pools.tasks.usage_sample"}) > bool 0', 1) == 1
    assert prom.wait_for('sum(osmo_background_tasks_total{task="pools.tasks.usage_sample",'
                         'state="SUCCESS"}) > bool 0', 1) == 1
    assert prom.wait_for('sum(osmo_http_requests_total{route="metrics",code="200"}) > bool 0',
                         1) == 1
    assert prom.value('osmo_leader_election_master_status{name="scheduler"}') == 1


def test_refused_submissions_count_under_their_code_and_change_nothing(stack):
    prom = stack.prometheus
    before = stack.workflows()
    # team has 10 unallocated GPUs (100, of which 90 in subpools); team--a's quota is 30.
    status, body, headers = stack.submit("team", 16, request_id="refusal-unallocated-1")
    assert (status, body["code"]) == (409, "exceeds_unallocated")
    assert headers["X-Request-ID"] == "refusal-unallocated-1"
    status, body, _ = stack.submit("team--a", 64)
    assert (status, body["code"]) == (409, "exceeds_quota")
    assert stack.workflows() == before  # a refusal writes nothing
    series = 'osmo_admission_attempts_total{{result="{}",kind="workflow",pool="{}"}}'
    assert prom.wait_for(series.format("exceeds_unallocated", "team"), 1) == 1
    assert prom.wait_for(series.format("exceeds_quota", "team--a"), 1) == 1
    assert prom.value('sum(osmo_admission_attempts_total{result="admitted"})') is None
    assert prom.wait_for(f'sum(osmo_http_requests_total{{route="{SUBMIT_ROUTE}",'
                         f'code="409"}})', 2) == 2
    # The web tier's JSON log line of the first refusal: its id, caller, pool, route, time.
    lines = [json.loads(line) for line in stack.log.read_text().splitlines()
             if line.startswith("{") and '"refusal-unallocated-1"' in line]
    request_line = next(line for line in lines if line["logger"] == "osmo.request")
    assert {key: request_line[key] for key in ("request_id", "user", "pool", "route",
                                                "status", "method")} == {
        "request_id": "refusal-unallocated-1", "user": "admin", "pool": "team",
        "route": SUBMIT_ROUTE, "status": 409, "method": "POST"}
    assert request_line["duration_ms"] > 0


def test_queue_allocation_matches_the_scheduler_status(stack):
    prom = stack.prometheus
    status, body, _ = stack.submit("team--a", 8)
    assert status == 201, body
    name = body["name"]
    deadline = time.monotonic() + 30
    while stack.call("GET", f"/api/workflow/{name}")[1]["status"] != "RUNNING":
        assert time.monotonic() < deadline, "the scheduler did not bind the workflow"
        time.sleep(0.3)
    # Tasks never end by themselves here (OSMO_SIM_TASK_SECONDS=0): the figures are stable.
    queues = stack.call("GET", "/api/scheduler/status")[1]["queues"]
    allocated = {q["name"]: q["allocated_gpus"] for q in queues}
    assert allocated["osmo-pool-osmo-team--a"] == 8
    deadline = time.monotonic() + 30
    while True:
        scraped = {row["metric"]["queue_name"]: float(row["value"][1])
                   for row in prom.query("osmo_queue_allocated_gpus")}
        if scraped == allocated or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert scraped == allocated
    assert prom.value('osmo_pool_used_gpus{pool="team--a"}') == 8
    assert prom.value('osmo_admission_attempts_total{result="admitted",pool="team--a"}') == 1
    assert prom.wait_for("osmo_scheduler_pods_bound_total", 1) == 1
    assert prom.wait_for('sum(osmo_scheduler_time_to_first_bind_seconds_count'
                         '{priority="NORMAL"})', 1) == 1


def test_a_dead_process_keeps_its_counters_and_drops_its_live_gauges(stack):
    """The scheduler loop killed (-9) and restarted by standalone: its cycles stay counted, and
    the leader gauge sums to 1, not to the dead process's 1 plus the new one's."""
    prom = stack.prometheus

    def scheduler() -> psutil.Process:
        return next(p for p, line in command_lines(
            psutil.Process(stack.process.pid).children(recursive=True)) if "run_scheduler" in line)

    old = scheduler()
    cycles = prom.value('sum(osmo_scheduler_cycles_total{result="success"})')
    assert cycles and cycles > 0
    old.kill()
    deadline = time.monotonic() + 30
    while True:
        try:
            if scheduler().pid != old.pid:
                break
        except (StopIteration, psutil.Error):
            pass
        assert time.monotonic() < deadline, "standalone did not restart the scheduler"
        time.sleep(0.2)
    assert prom.wait_for('sum(osmo_leader_election_master_status{name="scheduler"})', 1) == 1
    time.sleep(3)  # scrapes after the new leader took over: still 1, never 2
    assert prom.value('sum(osmo_leader_election_master_status{name="scheduler"})') == 1
    assert prom.value('sum(osmo_scheduler_cycles_total{result="success"})') >= cycles


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bosmo_[a-z0-9_]+", expr))


def _has_positive_samples(prom: Prometheus, name: str) -> bool:
    base = re.sub(r"_bucket$", "_count", name)
    return (prom.value(f"max({base}) > bool 0") or 0) == 1


# A pool the dashboard's variable offers, which by now holds a running workflow, an admission
# and a refusal: the $pool panels are read for it, as a user picking it in Grafana sees them.
POOL = "team--a"


def _grafana_to_promql(expr: str, pool: str = POOL) -> str:
    return expr.replace("$__rate_interval", "1m").replace("$pool", pool)


def pool_panels_without_series(prom: Prometheus, expressions: list[str], pool: str
                               ) -> list[str]:
    """The ``$pool`` expressions that return no series for ``pool`` though the scrape holds
    their metrics: a metric without the ``pool`` label (which ``.*`` would have matched)."""
    missing = []
    for expr in expressions:
        if "$pool" not in expr:
            continue
        promql = _grafana_to_promql(expr, pool)
        if all(prom.query(f"count({name})") for name in _metric_names(promql)) and \
                not prom.query(promql):
            missing.append(expr)
    return missing


def test_every_dashboard_and_alert_expression_runs_and_has_data_where_produced(stack):
    prom = stack.prometheus
    deadline = time.monotonic() + 30
    while not prom.targets_up():  # scraping already, so the rate windows below hold samples
        assert time.monotonic() < deadline, prom.api("targets")
        time.sleep(0.5)
    stack.submit("team", 16)  # a fresh refusal and a scrape of it inside the rate window
    stack.submit("team--b", 8)
    stack.submit(POOL, 64)  # a refusal of the pool the $pool panels are read for
    time.sleep(4)
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [target["expr"] for panel in dashboard["panels"]
                   for target in panel.get("targets", [])]
    variable = dashboard["templating"]["list"][1]["query"]["query"]
    assert variable == "label_values(osmo_pool_quota_gpus, pool)"
    deadline = time.monotonic() + 30
    while True:  # the variable's values, as Grafana lists them from the scrape
        offered = {row["metric"]["pool"]
                   for row in prom.query("group by (pool) (osmo_pool_quota_gpus)")}
        if POOL in offered or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert POOL in offered, offered
    pool_panels = [e for e in expressions if "$pool" in e]
    assert len(pool_panels) >= 10, pool_panels
    assert pool_panels_without_series(prom, expressions, POOL) == []
    unproduced = [e for e in pool_panels if not all(
        prom.query(f"count({name})") for name in _metric_names(e))]
    assert all("_drain_" in e for e in unproduced), unproduced  # no subpool drains here
    # The check sees a panel whose metric has no pool label, which ".*" let through.
    unlabelled = 'max(osmo_scheduler_last_cycle_timestamp_seconds{pool=~"$pool"})'
    assert prom.query(unlabelled.replace("$pool", ".*"))
    assert pool_panels_without_series(prom, [unlabelled], POOL) == [unlabelled]
    with_data = []
    for expr in expressions:
        promql = _grafana_to_promql(expr)
        result = prom.query(promql)  # valid PromQL, or the test fails with the reason
        if all(_has_positive_samples(prom, name) for name in _metric_names(promql)):
            assert result, f"no data for {expr}"
            with_data.append(expr)
    # Embedded cluster: everything but the Kubernetes backend's panels and the evictions /
    # moves / drains / non-preemptible figures no action here produced. The backends' own
    # panels show the `default` backend (an embedded one sends no heartbeat).
    assert len(with_data) >= 23, with_data
    kubernetes_only = ("apiserver_reachable", "last_contact", "kube_api_", "watch_restarts",
                       "relists", "dispatch_lag", "heartbeat_age")
    assert not [e for e in with_data if any(name in e for name in kubernetes_only)]
    assert {e for e in with_data if "osmo_backend_" in e} == {
        "min by (backend) (osmo_backend_up)", "max by (backend) (osmo_backend_nodes)",
        "max by (backend, state) (osmo_backend_gpus)"}
    assert {row["metric"]["backend"]: row["value"][1]
            for row in prom.query("min by (backend) (osmo_backend_up)")} == {"default": "1"}
    rules = yaml.safe_load(ALERTS.read_text())["groups"][0]["rules"]
    for rule in rules:
        prom.query(rule["expr"])
    assert {rule["alert"] for rule in rules} >= {
        "OsmoSchedulerNotCycling", "OsmoBackendAPIServerUnreachable", "OsmoQueueStarved",
        "OsmoAdmissionErrors"}
