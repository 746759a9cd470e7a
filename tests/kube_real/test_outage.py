"""A watch that expires (410 Gone) and an API server outage, on the real server: it is stopped,
etcd is compacted behind its back, and it starts again with a new watch cache."""

from __future__ import annotations

import pytest

from scheduler.backends.kubernetes.dispatch import ClusterUnavailable
from tests.k8s.conftest import spec, statuses, submit

pytestmark = pytest.mark.django_db


def test_an_expired_watch_relists_and_an_outage_converges(backend, cluster, apiserver, alice,
                                                         team) -> None:
    names = [submit(alice, "team", spec(n)) for n in ("done", "gone", "runs")]
    cluster.add_node("n1", gpus=8)
    done, gone, runs = (f"{n}-g-t0" for n in names)
    backend.dispatch()
    backend.listen()  # LIST
    for pod in (done, gone, runs):
        cluster.run(pod, "n1")
    assert backend.listen() == 6  # the WATCH: three bindings (node recorded), three Running
    # Changes nobody watches, then the API server goes away and etcd is compacted.
    cluster.finish(done)
    cluster.delete_pod(gone, final=True)
    apiserver.stop_apiserver()
    try:
        later = submit(alice, "team", spec("later"))  # admission does not need the cluster
        with pytest.raises(ClusterUnavailable):
            backend.dispatch()
        with pytest.raises(Exception) as refused:  # noqa: PT011 - connection refused
            backend.listen()
        assert getattr(refused.value, "status", None) is None
        apiserver.compact_etcd()
    finally:
        apiserver.start_apiserver()
    version = backend.listener.resource_version
    assert backend.listen() == 0  # 410 Gone: that resourceVersion is compacted
    assert backend.listener.resource_version is None and version is not None
    assert backend.listen() == 2  # the re-LIST: one COMPLETED, one FAILED_EVICTED
    assert statuses(alice, names[0]) == ("COMPLETED", ["COMPLETED"])
    assert statuses(alice, names[1]) == ("FAILED_EVICTED", ["FAILED_EVICTED"])
    assert statuses(alice, names[2]) == ("RUNNING", ["RUNNING"])
    assert backend.listen() == 0  # watching on from the LIST: nothing is applied twice
    backend.listener.relist_requested = True
    assert backend.listen() == 0
    # Work admitted during the outage is dispatched now.
    assert backend.dispatch().applied == [f"{later}-g"]
    assert cluster.get("pods", f"{later}-g-t0") is not None
    cluster.run(f"{later}-g-t0", "n1")
    assert backend.listen() == 2  # bound, then Running
    assert statuses(alice, later) == ("RUNNING", ["RUNNING"])
