"""KAI Queue and Topology sync against the real CRDs (structural schemas, pruning) under the
backend's least-privilege token."""

from __future__ import annotations

import pytest

from pools import services as pool_services
from scheduler.kai.queues import build_topology
from scheduler.kai.sync import sync_namespace, sync_objects
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(backend):
    return backend.kube.custom


def test_queues_follow_the_pools_through_update_deleting_and_archive(api, cluster,
                                                                      namespace) -> None:
    team = factories.pool("team", 100)
    a = factories.subpool(team, "a", 30)
    b = factories.subpool(team, "b", 40)
    root, pool = f"osmo-default-{namespace}", f"osmo-pool-{namespace}-team"
    shared, qa, qb = f"{pool}.shared", f"{pool}--a", f"{pool}--b"

    def quotas() -> dict[str, int]:
        return {name: q["spec"]["resources"]["gpu"]["quota"]
                for name, q in cluster.queues().items() if namespace in name}

    summary = sync_namespace(namespace=namespace, api=api)
    assert [c for c in summary.created if c.startswith("Queue/")] == [
        f"Queue/{n}" for n in (root, pool, shared, qa, qb)]
    # The Topology is cluster-scoped and one name for every namespace: an earlier test's
    # namespace made it, so this one adopts it.
    assert "Topology/osmo-topology" in summary.created + summary.replaced
    assert quotas() == {root: -1, pool: 100, shared: 30, qa: 30, qb: 40}
    stored = cluster.queues()[qa]
    assert stored["spec"]["parentQueue"] == pool  # nothing pruned by the schema
    assert stored["metadata"]["labels"]["osmo.namespace"] == namespace
    assert sync_namespace(namespace=namespace, api=api).changed is False

    pool_services.subpool_update(actor=None, subpool=a, quota_gpus=10)  # update
    assert sync_namespace(namespace=namespace, api=api).replaced == [f"Queue/{shared}",
                                                                      f"Queue/{qa}"]
    assert quotas()[qa] == 10 and quotas()[shared] == 50

    factories.running_workflow(b, 1)
    pool_services.subpool_delete(actor=None, subpool=b)  # busy: DELETING, quota 0
    sync_namespace(namespace=namespace, api=api)
    assert quotas()[qb] == 0

    pool_services.subpool_delete(actor=None, subpool=a)  # idle: archived at once
    assert sync_namespace(namespace=namespace, api=api).deleted == [f"Queue/{qa}"]
    assert qa not in cluster.queues()


def test_the_topology_is_accepted_and_changed_by_recreate(api, cluster, namespace) -> None:
    sync_objects(api, [build_topology(namespace)], namespace=namespace)
    topology = cluster.server.request("GET",
                                      "/apis/kai.scheduler/v1alpha1/topologies/osmo-topology")
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [
        level["nodeLabel"] for level in build_topology(namespace)["spec"]["levels"]]
    renamed = build_topology(namespace, levels=[("zone", "topology.osmo/zone"),
                                                ("hostname", "kubernetes.io/hostname")])
    assert sync_objects(api, [renamed], namespace=namespace).replaced == [
        "Topology/osmo-topology"]
    alias_only = build_topology(namespace, levels=[("region", "topology.osmo/zone"),
                                                   ("host", "kubernetes.io/hostname")])
    assert sync_objects(api, [alias_only], namespace=namespace).replaced == [
        "Topology/osmo-topology"]
    topology = cluster.server.request("GET",
                                      "/apis/kai.scheduler/v1alpha1/topologies/osmo-topology")
    assert [level.get("alias") for level in topology["spec"]["levels"]] == ["region", "host"]
