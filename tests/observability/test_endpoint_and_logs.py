"""In-process: who may read /metrics, the request id, labels that stay bounded, the log line
of a request in JSON and in text, OSMO_METRICS=off, and a non-web process's own endpoint."""

from __future__ import annotations

import io
import ipaddress
import json
import logging
import os
import re
import urllib.error
import urllib.request

import pytest
from django.test import override_settings
from prometheus_client import REGISTRY
from rest_framework.test import APIClient

from osmo.accounts import services
from osmo.observability import logs, metrics, server
from scheduler import metrics as scheduler_metrics
from scheduler.backends.kubernetes.metrics import request_labels
from tests import factories
from tests.conftest import make_client

pytestmark = pytest.mark.django_db

SPEC = ("workflow:\n  name: obs\n  tasks:\n  - {{name: main, image: x, command: [sleep, '1'], "
        "resource: r}}\n  resources:\n    r: {{gpu: {gpus}}}\n")


def sample(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def team(db):
    parent = factories.pool("team", 16)
    factories.subpool(parent, "a", 8)
    return parent


# --- access ------------------------------------------------------------------------------------

def test_metrics_need_the_metrics_role_or_an_allowed_address():
    anonymous = APIClient()
    answer = anonymous.get("/metrics")
    assert answer.status_code == 401
    assert answer.json()["code"] == "not_authenticated"
    assert make_client("viewer", "osmo-team-user").get("/metrics").status_code == 403
    assert anonymous.get("/metrics", HTTP_AUTHORIZATION="Bearer osmo_wrong").status_code == 401
    for client in (make_client("prometheus", "osmo-metrics"), make_client("root", "osmo-admin")):
        answer = client.get("/metrics")
        assert answer.status_code == 200
        assert answer["Content-Type"].startswith("text/plain; version=0.0.4")
        assert b"# TYPE osmo_http_requests_total counter" in answer.content
    with override_settings(OSMO_METRICS_ALLOWED_NETWORKS=(
            ipaddress.ip_network("127.0.0.0/8"),)):
        assert anonymous.get("/metrics").status_code == 200  # the test client is 127.0.0.1
        assert anonymous.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 401
        assert anonymous.post("/metrics").status_code == 405


def test_metrics_off_serves_and_records_nothing():
    bound = sample("osmo_scheduler_pods_bound_total")
    with override_settings(OSMO_METRICS=False):
        scheduler_metrics.record_cycle(snapshot=0.1, decide=0.1, apply=0.1, bound=5)
        answer = make_client("root", "osmo-admin").get("/metrics")
    assert answer.status_code == 404
    assert sample("osmo_scheduler_pods_bound_total") == bound
    scheduler_metrics.record_cycle(snapshot=0.1, decide=0.1, apply=0.1, bound=5)
    assert sample("osmo_scheduler_pods_bound_total") == bound + 5


# --- request id and labels -------------------------------------------------------------------

def test_the_request_id_is_returned_taken_when_sane_and_made_otherwise():
    client = make_client("someone")
    assert client.get("/api/whoami", HTTP_X_REQUEST_ID="trace-42.a:b")["X-Request-ID"] == \
        "trace-42.a:b"
    for bad in ("has space", "x" * 129, "<script>", "-leading-dash", "", "trailing\n"):
        made = client.get("/api/whoami", HTTP_X_REQUEST_ID=bad)["X-Request-ID"]
        assert re.fullmatch(r"[0-9a-f]{32}", made), (bad, made)
    # Refused before any view (the body limit) and not found: an id all the same.
    assert re.fullmatch(r"[0-9a-f]{32}", client.post(
        "/api/whoami", CONTENT_LENGTH=str(10**9))["X-Request-ID"])
    assert client.get("/nowhere")["X-Request-ID"]


def test_labels_are_route_templates_and_known_pools_never_input(team):
    client = make_client("root", "osmo-admin")
    before = sample("osmo_http_requests_total", method="GET", route="api/workflow/<str:name>",
                    code="404")
    assert client.get("/api/workflow/no-such-workflow-17").status_code == 404
    assert sample("osmo_http_requests_total", method="GET", route="api/workflow/<str:name>",
                  code="404") == before + 1
    unknown = sample("osmo_admission_attempts_total", result="pool_not_found", kind="workflow",
                     pool="")
    assert client.post("/api/pool/no-such-pool-17/workflow", {"file": SPEC.format(gpus=1)},
                       format="json").status_code == 404
    assert sample("osmo_admission_attempts_total", result="pool_not_found", kind="workflow",
                  pool="") == unknown + 1
    exposition = metrics.exposition().decode()
    assert "no-such-workflow-17" not in exposition and "no-such-pool-17" not in exposition
    refused = sample("osmo_admission_attempts_total", result="exceeds_quota", kind="workflow",
                     pool="team--a")
    answer = client.post("/api/pool/team--a/workflow", {"file": SPEC.format(gpus=9)},
                         format="json")
    assert answer.json()["code"] == "exceeds_quota"
    assert sample("osmo_admission_attempts_total", result="exceeds_quota", kind="workflow",
                  pool="team--a") == refused + 1


def test_kubernetes_api_paths_become_verb_and_resource_never_names():
    assert request_labels("POST", "https://k/api/v1/namespaces/osmo/pods/w-1/binding") == (
        "create", "pods/binding")
    assert request_labels("GET", "https://k/api/v1/namespaces/osmo/pods?watch=true&x=1") == (
        "watch", "pods")
    assert request_labels("GET", "https://k/api/v1/namespaces/osmo/pods") == ("list", "pods")
    assert request_labels("PATCH", "https://k/api/v1/namespaces/o/pods/p/status") == (
        "patch", "pods/status")
    assert request_labels("GET", "https://k/apis/scheduling.run.ai/v2/queues/q1") == (
        "get", "queues")
    assert request_labels("DELETE", "https://k/apis/scheduling.run.ai/v2alpha2/namespaces/o/"
                                    "podgroups") == ("deletecollection", "podgroups")
    assert request_labels("GET", "https://k/version") == ("get", "other")


# --- logs ----------------------------------------------------------------------------------

@pytest.fixture
def request_log():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(logs.ContextFilter())
    logger = logging.getLogger("osmo.request")
    logger.addHandler(handler)
    try:
        yield handler, stream
    finally:
        logger.removeHandler(handler)


def test_a_request_is_one_json_line_with_its_id_user_pool_workflow_route_duration(
        team, request_log):
    handler, stream = request_log
    handler.setFormatter(logs.JSONFormatter())
    client = make_client("alice", "osmo-team-user")
    answer = client.post("/api/pool/team--a/workflow", {"file": SPEC.format(gpus=2)},
                         format="json", HTTP_X_REQUEST_ID="submit-1")
    assert answer.status_code == 201
    line = json.loads(stream.getvalue().strip().splitlines()[-1])
    assert {key: line[key] for key in ("logger", "level", "request_id", "user", "pool",
                                       "workflow", "route", "method", "status")} == {
        "logger": "osmo.request", "level": "INFO", "request_id": "submit-1", "user": "alice",
        "pool": "team--a", "workflow": answer.json()["name"],
        "route": "api/pool/<str:pool>/workflow", "method": "POST", "status": 201}
    assert line["duration_ms"] > 0 and line["time"].endswith("Z")
    assert line["message"].startswith("POST /api/pool/team--a/workflow 201 ")


def test_text_lines_carry_the_same_fields_as_key_values(team, request_log):
    handler, stream = request_log
    handler.setFormatter(logs.PlainFormatter())
    make_client("bob", "osmo-team-user").get("/api/workflow/nothing-here",
                                             HTTP_X_REQUEST_ID="get-1")
    line = stream.getvalue().strip().splitlines()[-1]
    assert " INFO osmo.request: GET /api/workflow/nothing-here 404 " in line
    for field in ("request_id=get-1", "user=bob", "workflow=nothing-here",
                  "route=api/workflow/<str:name>", "status=404"):
        assert field in line, line


# --- the other processes --------------------------------------------------------------------

def test_dead_processes_lose_their_live_gauges_only(tmp_path):
    dead = 4_000_000  # above pid_max: no such process
    for name in (f"gauge_livesum_{dead}.db", f"gauge_livesum_{os.getpid()}.db",
                 f"counter_{dead}.db", f"histogram_{dead}.db"):
        (tmp_path / name).write_bytes(b"")
    assert metrics.mark_dead_processes(str(tmp_path)) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"counter_{dead}.db", f"gauge_livesum_{os.getpid()}.db", f"histogram_{dead}.db"]


@pytest.mark.django_db(transaction=True)
def test_a_process_serves_its_own_metrics_under_the_same_rules():
    raw = services.token_issue(user=services.user_ensure(username="scraper2",
                                                         groups=["osmo-metrics"]))
    running = server.serve(0, host="127.0.0.1")
    url = f"http://127.0.0.1:{running.server_port}"
    try:
        def get(path: str, token: str | None = None) -> tuple[int, bytes]:
            request = urllib.request.Request(url + path)
            if token:
                request.add_header("Authorization", f"Bearer {token}")
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
                    return answer.status, answer.read()
            except urllib.error.HTTPError as error:
                return error.code, error.read()

        status, body = get("/metrics")
        assert (status, json.loads(body)["code"]) == (401, "not_authenticated")
        status, body = get("/metrics", raw)
        assert status == 200 and b"osmo_scheduler_cycles_total" in body
        assert b"osmo_pool_quota_gpus" not in body  # the web tier exports those, once
        assert get("/elsewhere", raw)[0] == 404
    finally:
        running.shutdown()
