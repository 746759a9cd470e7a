"""The backend process wakes when a submission commits (the `WorkflowAdmitted` event → a
PostgreSQL NOTIFY its leader LISTENs to), and when workflows are canceled: new work does not
wait for the next poll. The poll interval here is a minute; the pods must come well before."""

from __future__ import annotations

import time

import pytest

from tests import factories
from tests.conftest import make_client
from tests.k8s.conftest import spec, submit

from .conftest import wait_for
from .test_runner import run_backend

POLL = 60.0  # OSMO_K8S_INTERVAL: a submission that waited for the poll would take this long
PROMPT = 30.0  # what "at once" may take on a loaded machine, half the way to the poll


@pytest.fixture
def slow_runner(apiserver, k8s_settings, transactional_db):
    k8s_settings.OSMO_K8S_INTERVAL = POLL
    yield from run_backend(apiserver, interval=POLL, resync=POLL)


def test_a_submission_and_a_cancel_wake_the_backend(slow_runner, cluster, client) -> None:
    factories.pool("team", 64)
    alice = make_client("alice", "osmo-team-user")
    # The leader's first pass is done (it wrote its health), so only a wake-up can dispatch now.
    wait_for(lambda: client.get("/api/health").json().get("cluster") == "ok", what="healthy")
    time.sleep(0.5)

    started = time.monotonic()
    name = submit(alice, "team", spec("wake", tasks=2))
    pods = [f"{name}-g-t0", f"{name}-g-t1"]
    wait_for(lambda: all(cluster.get("pods", pod) for pod in pods), timeout=PROMPT,
             what="the submission's pods before the next poll")
    assert time.monotonic() - started < PROMPT < POLL

    started = time.monotonic()
    assert alice.post(f"/api/workflow/{name}/cancel").status_code == 200
    wait_for(lambda: cluster.names("pods") == [] and cluster.names("podgroups") == [],
             timeout=PROMPT, what="the canceled workflow's pods deleted before the next poll")
    assert time.monotonic() - started < PROMPT < POLL
