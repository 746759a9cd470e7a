"""Workflow-end notifications through the real broker and a real `celery worker`, to a real
SMTP server (aiosmtpd) and a local webhook receiver started by the test."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests import factories
from tests.background.conftest import wait_for
from tests.conftest import make_client

pytestmark = pytest.mark.django_db(transaction=True)

aiosmtpd_controller = pytest.importorskip("aiosmtpd.controller")

SPEC = """
workflow:
  name: long-run
  tasks:
  - {name: main, image: x, command: [train], resource: r}
  resources:
    r: {gpu: 1, cpu: 1, memory: 1Gi}
"""
WEBHOOK_SECRET = "T000/B000/s3cr3t-webhook-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Inbox:
    """aiosmtpd's handler: every message the server accepts."""

    def __init__(self):
        self.messages: list[tuple[list[str], str]] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        self.messages.append((list(envelope.rcpt_tos), envelope.content.decode()))
        return "250 OK"


@pytest.fixture
def smtp():
    inbox = Inbox()
    controller = aiosmtpd_controller.Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield controller, inbox
    controller.stop()


@pytest.fixture
def webhook(settings):
    """A local receiver: answers `status` (200 by default; `location` makes it a redirect)
    and keeps the bodies. Its host:port is an allowed webhook host here (``allowed_env`` for
    a worker's)."""
    received: list[dict] = []
    state = {"status": 200, "location": None}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            length = min(int(self.headers.get("Content-Length", 0)), 65536)
            received.append({"path": self.path, "body": json.loads(self.rfile.read(length))})
            self.send_response(state["status"])
            if state["location"]:
                self.send_header("Location", state["location"])
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.OSMO_NOTIFY_WEBHOOK_HOSTS = [f"127.0.0.1:{server.server_port}"]
    yield f"http://127.0.0.1:{server.server_port}/services/{WEBHOOK_SECRET}", received, state
    server.shutdown()
    server.server_close()


def allowed_env(url: str) -> dict[str, str]:
    """A worker's allow-list: the receiver's host:port."""
    return {"OSMO_NOTIFY_WEBHOOK_HOSTS": url.split("/")[2]}


def run_workflow(alice, backend, status: str = "COMPLETED") -> tuple[str, float]:
    response = alice.post("/api/pool/team/workflow", {"file": SPEC}, format="json")
    assert response.status_code == 201, response.json()
    name = response.json()["name"]
    backend.post(f"/api/workflow/{name}/task/main/status", {"status": "RUNNING"},
                 format="json")
    started = time.monotonic()
    response = backend.post(f"/api/workflow/{name}/task/main/status",
                            {"status": status, "exit_code": 0 if status == "COMPLETED" else 1},
                            format="json")
    took = time.monotonic() - started
    assert response.status_code == 200 and response.json()["status"] == status
    return name, took


@pytest.fixture
def people():
    factories.pool("team", 10)
    return make_client("alice", "osmo-team-user"), make_client("listener", "osmo-backend")


def settings_of(alice, **body) -> dict:
    response = alice.post("/api/profile/settings", body, format="json")
    assert response.status_code == 200, response.json()
    return response.json()["profile"]


def test_an_ended_workflow_is_mailed_and_posted_by_the_worker(people, smtp, webhook,
                                                              start_celery):
    alice, backend = people
    controller, inbox = smtp
    url, received, _ = webhook
    profile = settings_of(alice, email_notification=True, email="alice@example.com",
                          slack_notification=True, slack_webhook=url)
    assert profile["email"] == "alice@example.com" and profile["slack_webhook_set"] is True
    worker = start_celery("worker", OSMO_SMTP_HOST="127.0.0.1",
                          OSMO_SMTP_PORT=str(controller.port), **allowed_env(url),
                          OSMO_DASHBOARD_URL="https://osmo.example")
    name, _ = run_workflow(alice, backend)
    wait_for(lambda: inbox.messages and received, 20, "the email and the webhook")
    (recipients, mail), = inbox.messages
    assert recipients == ["alice@example.com"]
    assert f"Subject: OSMO workflow {name} COMPLETED" in mail
    assert f"Workflow {name} ended COMPLETED in pool team." in mail
    assert "Duration: 0h00m0" in mail
    assert f"Dashboard: https://osmo.example/workflows/{name}/" in mail
    (post,) = received
    assert post["path"] == f"/services/{WEBHOOK_SECRET}"
    assert post["body"]["text"].startswith(f"*OSMO workflow {name} COMPLETED*")
    assert "workflows.tasks.workflow_notify" in worker.output()
    # The webhook's URL is never shown back, nor logged.
    assert WEBHOOK_SECRET not in json.dumps(alice.get("/api/profile/settings").json())
    assert WEBHOOK_SECRET not in worker.output()


def test_a_broken_smtp_server_and_webhook_are_retried_logged_and_never_hold_the_lifecycle(
        people, webhook, start_celery):
    alice, backend = people
    url, received, state = webhook
    state["status"] = 500
    settings_of(alice, email_notification=True, email="alice@example.com",
                slack_notification=True, slack_webhook=url)
    worker = start_celery("worker", OSMO_SMTP_HOST="127.0.0.1", OSMO_SMTP_PORT=str(free_port()),
                          OSMO_NOTIFY_RETRIES="2", OSMO_NOTIFY_BACKOFF="1", **allowed_env(url))
    name, took = run_workflow(alice, backend, "FAILED")
    assert took < 2  # the report answered without waiting for any delivery
    wait_for(lambda: worker.output().count("given up after 2 retries") == 2, 30,
             "both channels to be given up")
    assert len(received) == 3  # the first attempt and two retries
    out = worker.output()
    assert f"email for workflow {name}: ConnectionRefusedError; retry 1" in out
    assert f"slack for workflow {name}: HTTPError; retry 2" in out
    assert WEBHOOK_SECRET not in out


def test_a_failed_attempt_is_counted(people, webhook):
    from workflows import notifications
    from workflows.metrics import NOTIFICATIONS
    from workflows.models import Workflow

    alice, backend = people
    url, _, state = webhook
    state["status"] = 503
    settings_of(alice, slack_notification=True, slack_webhook=url)
    name, _ = run_workflow(alice, backend)
    before = NOTIFICATIONS.labels("slack", "failed")._value.get()
    with pytest.raises(notifications.DeliveryError):
        notifications.deliver(Workflow.objects.get(name=name).pk, "slack")
    assert NOTIFICATIONS.labels("slack", "failed")._value.get() == before + 1
    state["status"] = 200
    sent = NOTIFICATIONS.labels("slack", "sent")._value.get()
    assert notifications.deliver(Workflow.objects.get(name=name).pk, "slack") is True
    assert NOTIFICATIONS.labels("slack", "sent")._value.get() == sent + 1


def test_a_broker_that_is_down_costs_the_status_change_nothing(people, restartable_broker):
    from workflows.metrics import NOTIFICATIONS

    alice, backend = people
    settings_of(alice, email_notification=True, email="alice@example.com")
    before = NOTIFICATIONS.labels("email", "not_queued")._value.get()
    restartable_broker.stop()
    name, took = run_workflow(alice, backend)
    assert took < 3
    assert alice.get(f"/api/workflow/{name}").json()["status"] == "COMPLETED"
    assert NOTIFICATIONS.labels("email", "not_queued")._value.get() == before + 1


def test_a_webhook_no_longer_allowed_is_refused_and_counted_not_posted(people, webhook,
                                                                      settings):
    from workflows import notifications
    from workflows.metrics import NOTIFICATIONS
    from workflows.models import Workflow

    alice, backend = people
    url, received, _ = webhook
    settings_of(alice, slack_notification=True, slack_webhook=url)
    name, _ = run_workflow(alice, backend)
    settings.OSMO_NOTIFY_WEBHOOK_HOSTS = ["hooks.slack.com"]  # the admin narrowed the list
    refused = NOTIFICATIONS.labels("slack", "refused")._value.get()
    assert notifications.deliver(Workflow.objects.get(name=name).pk, "slack") is False
    assert NOTIFICATIONS.labels("slack", "refused")._value.get() == refused + 1
    assert received == []


def test_a_webhook_s_redirect_is_not_followed(people, webhook):
    from workflows import notifications
    from workflows.models import Workflow

    alice, backend = people
    url, received, state = webhook
    settings_of(alice, slack_notification=True, slack_webhook=url)
    name, _ = run_workflow(alice, backend)
    state["status"], state["location"] = 307, url.replace("/services/", "/elsewhere/")
    with pytest.raises(notifications.DeliveryError):
        notifications.deliver(Workflow.objects.get(name=name).pk, "slack")
    assert [r["path"] for r in received] == [f"/services/{WEBHOOK_SECRET}"]  # once, no more
