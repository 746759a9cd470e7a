"""The Kubernetes backend's metrics on the real API server: its requests by verb, resource and
code (an outage's as `error`), the LIST and WATCH life of the pod listener (initial list, a
watch the server ends, one the outage breaks, one that expired, the re-list), the lag from
submission to dispatch; and with OSMO_PLACEMENT=osmo, our scheduler's cycles, binds and
leadership as the backend process runs them."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from tests import factories
from tests.conftest import make_client
from tests.k8s.conftest import spec, statuses, submit

from .conftest import wait_for
from .test_osmo_runner import osmo_runner  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def counts(metric: str, **labels) -> float:
    return REGISTRY.get_sample_value(metric, labels) or 0.0


def test_requests_watches_relists_and_dispatch_lag_are_counted(backend, cluster, apiserver,
                                                               alice, team) -> None:
    series = {
        "create pods": ("osmo_backend_kube_api_requests_total",
                        {"verb": "create", "resource": "pods", "code": "201"}),
        "list pods": ("osmo_backend_kube_api_requests_total",
                      {"verb": "list", "resource": "pods", "code": "200"}),
        "watch pods": ("osmo_backend_kube_api_requests_total",
                       {"verb": "watch", "resource": "pods", "code": "200"}),
        "no answer": ("osmo_backend_kube_api_requests_total",
                      {"verb": "watch", "resource": "pods", "code": "error"}),
        "initial": ("osmo_backend_relists_total", {"resource": "pods", "reason": "initial"}),
        "relist expired": ("osmo_backend_relists_total",
                           {"resource": "pods", "reason": "expired"}),
        "timeout": ("osmo_backend_watch_restarts_total",
                    {"resource": "pods", "reason": "timeout"}),
        "error": ("osmo_backend_watch_restarts_total", {"resource": "pods", "reason": "error"}),
        "expired": ("osmo_backend_watch_restarts_total",
                    {"resource": "pods", "reason": "expired"}),
        "dispatched": ("osmo_backend_dispatch_lag_seconds_count", {}),
    }
    before = {key: counts(name, **labels) for key, (name, labels) in series.items()}
    name = submit(alice, "team", spec("m"))
    cluster.add_node("n1", gpus=8)
    assert backend.dispatch().applied == [f"{name}-g"]
    backend.listen()  # the first LIST
    cluster.run(f"{name}-g-t0", "n1")
    assert backend.listen() == 2  # one WATCH, ended by the server after its second
    apiserver.stop_apiserver()
    try:
        with pytest.raises(Exception):  # noqa: B017, PT011 - connection refused
            backend.listen()
        apiserver.compact_etcd()
    finally:
        apiserver.start_apiserver()
    assert backend.listen() == 0  # 410 Gone
    backend.listen()  # the re-LIST
    after = {key: counts(name, **labels) for key, (name, labels) in series.items()}
    assert {key: after[key] - before[key] for key in series} == {
        "create pods": 1, "list pods": 2, "watch pods": 2, "no answer": 1, "initial": 1,
        "relist expired": 1, "timeout": 1, "error": 1, "expired": 1, "dispatched": 1}


@pytest.mark.parametrize("osmo_runner", ["thread"], indirect=True)  # in this process's registry
def test_osmo_placement_records_its_cycles_binds_and_leadership(osmo_runner, cluster,
                                                                namespace) -> None:
    bound = counts("osmo_scheduler_pods_bound_total")
    binds = counts("osmo_backend_kube_api_requests_total", verb="create",
                   resource="pods/binding", code="201")
    decided = counts("osmo_scheduler_cycle_duration_seconds_count", phase="decide")
    factories.pool("team", 64)
    alice = make_client("alice", "osmo-team-user")
    cluster.add_node(f"{namespace}-n1", gpus=8)
    name = submit(alice, "team", spec("placed", gpus=2, tasks=2))
    wait_for(lambda: statuses(alice, name) == ("RUNNING", ["RUNNING", "RUNNING"]),
             timeout=30, what="tasks running")
    assert counts("osmo_scheduler_pods_bound_total") - bound == 2
    assert counts("osmo_backend_kube_api_requests_total", verb="create",
                  resource="pods/binding", code="201") - binds == 2
    assert counts("osmo_scheduler_cycle_duration_seconds_count", phase="decide") > decided
    assert counts("osmo_leader_election_master_status", name="k8s backend default") == 1
