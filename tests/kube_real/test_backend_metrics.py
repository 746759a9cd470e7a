"""The Kubernetes backend's metrics on the real API server: its requests by verb, resource and
code (an outage's as `error`), the LIST and WATCH life of the pod listener (initial list, a
watch the server ends, one the outage breaks, one that expired, the re-list), the lag from
submission to dispatch."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from tests.k8s.conftest import spec, submit

pytestmark = pytest.mark.django_db


def counts(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


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
