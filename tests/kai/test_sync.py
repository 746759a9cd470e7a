"""Cluster sync through the real `kubernetes` client against an HTTP API emulator.

The real-API-server tier (tests/kube_real/test_queues.py) shows the Queues and the Topology
accepted by the real CRDs through create, update, DELETING and archive. What stays here needs
the emulator's request log or injected answers: no write at all on an unchanged cluster, the
order of creates and deletes (parents first, children first), a 409 Conflict from a concurrent
writer and endless conflicts, a 500 mid-sync; and the management command and Celery task."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from pools import services as pool_services
from scheduler import tasks
from scheduler.core.kai_names import BLOCK_LABEL, HOSTNAME_LABEL, RACK_LABEL, ZONE_LABEL
from scheduler.kai import sync
from scheduler.kai.queues import build_queue_hierarchy, build_topology
from scheduler.kai.selectors import desired_cluster_objects, topology_manifest
from scheduler.kai.sync import KaiSyncError, sync_namespace, sync_objects
from scheduler.models import Node
from tests import factories

from .emulator import KubeEmulator

pytestmark = pytest.mark.django_db

ROOT, TEAM, SHARED = "osmo-default-osmo", "osmo-pool-osmo-team", "osmo-pool-osmo-team.shared"
A, B = "osmo-pool-osmo-team--a", "osmo-pool-osmo-team--b"


@pytest.fixture
def cluster():
    emulator = KubeEmulator().start()
    yield emulator
    emulator.stop()


@pytest.fixture
def team():
    team = factories.pool("team", 100)
    factories.subpool(team, "a", 30)
    factories.subpool(team, "b", 40)
    return team


def quota(cluster, name) -> int:
    return cluster.objects[("queues", name)]["spec"]["resources"]["gpu"]["quota"]


def test_first_run_creates_parents_first_and_second_run_changes_nothing(cluster, team) -> None:
    summary = sync_namespace(namespace="osmo", api=cluster.api())
    assert summary.created == [f"Queue/{n}" for n in (ROOT, TEAM, SHARED, A, B)] + \
        ["Topology/osmo-topology"]
    assert cluster.names("queues") == sorted([ROOT, TEAM, SHARED, A, B])
    assert (quota(cluster, SHARED), quota(cluster, A)) == (30, 30)
    assert [r for r in cluster.writes()] == [("POST", "queues", n) for n in
                                             (ROOT, TEAM, SHARED, A, B)] + \
        [("POST", "topologies", "osmo-topology")]
    cluster.requests.clear()
    again = sync_namespace(namespace="osmo", api=cluster.api())
    assert again.counts() == {"created": 0, "replaced": 0, "deleted": 0, "unchanged": 6}
    assert cluster.writes() == []
    assert cluster.requests == [("GET", "queues", None), ("GET", "topologies", None)]


def test_changes_replace_with_resource_version_and_deletes_go_children_first(cluster,
                                                                             team) -> None:
    sync_namespace(namespace="osmo", api=cluster.api())
    version = cluster.objects[("queues", A)]["metadata"]["resourceVersion"]
    pool_services.subpool_update(actor=None, subpool=team.subpools.get(subpool_name="a"),
                                 quota_gpus=10)
    summary = sync_namespace(namespace="osmo", api=cluster.api())
    assert summary.replaced == [f"Queue/{SHARED}", f"Queue/{A}"]
    assert (quota(cluster, SHARED), quota(cluster, A)) == (50, 10)
    assert cluster.objects[("queues", A)]["metadata"]["resourceVersion"] != version

    team_pool = type(team).objects.get(pk=team.pk)
    for subpool in team_pool.subpools.all():
        pool_services.subpool_delete(actor=None, subpool=subpool)
    pool_services.pool_delete(actor=None, pool=team_pool)
    cluster.requests.clear()
    summary = sync_namespace(namespace="osmo", api=cluster.api())
    assert summary.deleted == [f"Queue/{n}" for n in (A, B, SHARED, TEAM)]
    assert [r[:2] for r in cluster.writes()] == [("DELETE", "queues")] * 4
    assert [r[2] for r in cluster.writes()] == [A, B, SHARED, TEAM]  # leaves, then the parent
    assert cluster.names("queues") == [ROOT]


def test_other_namespaces_and_foreign_labels_are_left_alone(cluster, team) -> None:
    foreign = build_queue_hierarchy([], "staging")[0]
    cluster.put_object("queues", foreign)
    unlabelled = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
                  "metadata": {"name": "default-queue"}, "spec": {}}
    cluster.put_object("queues", unlabelled)
    sync_namespace(namespace="osmo", api=cluster.api())
    queue = dict(cluster.objects[("queues", A)])
    queue["metadata"] = {**queue["metadata"],
                         "labels": {**queue["metadata"]["labels"], "team": "x"},
                         "annotations": {**queue["metadata"]["annotations"], "note": "kept"}}
    queue["spec"] = {**queue["spec"], "priority": 1}
    cluster.put_object("queues", queue)
    summary = sync_namespace(namespace="osmo", api=cluster.api())
    assert summary.replaced == [f"Queue/{A}"]
    stored = cluster.objects[("queues", A)]["metadata"]
    assert stored["labels"]["team"] == "x" and stored["annotations"]["note"] == "kept"
    assert cluster.objects[("queues", A)]["spec"]["priority"] == 100
    assert "osmo-default-staging" in cluster.names("queues")
    assert "default-queue" in cluster.names("queues")


def test_a_409_conflict_mid_sync_is_re_read_and_retried(cluster, team) -> None:
    sync_namespace(namespace="osmo", api=cluster.api())
    pool_services.subpool_update(actor=None, subpool=team.subpools.get(subpool_name="b"),
                                 quota_gpus=5)

    def concurrent_writer(emulator):  # someone else touches the queue between list and PUT
        current = emulator.objects[("queues", B)]
        emulator.put_object("queues", {**current, "metadata": {**current["metadata"],
                                                               "labels": {
                                                                   **current["metadata"]["labels"],
                                                                   "touched": "yes"}}})

    cluster.before("PUT", B, concurrent_writer)
    cluster.requests.clear()
    summary = sync_namespace(namespace="osmo", api=cluster.api())
    assert summary.replaced == [f"Queue/{SHARED}", f"Queue/{B}"]
    assert [r for r in cluster.requests if r[2] == B] == [
        ("PUT", "queues", B), ("GET", "queues", B), ("PUT", "queues", B)]
    assert quota(cluster, B) == 5
    assert cluster.objects[("queues", B)]["metadata"]["labels"]["touched"] == "yes"
    assert sync_namespace(namespace="osmo", api=cluster.api()).changed is False


def test_endless_conflicts_give_up_bounded(cluster, team) -> None:
    sync_namespace(namespace="osmo", api=cluster.api())
    pool_services.subpool_update(actor=None, subpool=team.subpools.get(subpool_name="a"),
                                 quota_gpus=1)
    for _ in range(sync.MAX_CONFLICT_RETRIES):
        cluster.fail_next("PUT", A, 409)
    with pytest.raises(KaiSyncError) as caught:
        sync_namespace(namespace="osmo", api=cluster.api())
    assert caught.value.status == 409
    assert caught.value.summary.replaced == [f"Queue/{SHARED}"]
    assert sync_namespace(namespace="osmo", api=cluster.api()).replaced == [f"Queue/{A}"]


def test_a_500_mid_sync_stops_the_run_and_the_next_run_converges(cluster, team) -> None:
    cluster.fail_next("POST", A, 500)
    with pytest.raises(KaiSyncError) as caught:
        sync_namespace(namespace="osmo", api=cluster.api())
    assert caught.value.status == 500
    assert caught.value.summary.created == [f"Queue/{n}" for n in (ROOT, TEAM, SHARED)]
    assert cluster.names("queues") == sorted([ROOT, TEAM, SHARED])
    summary = sync_namespace(namespace="osmo", api=cluster.api())
    assert summary.created == [f"Queue/{A}", f"Queue/{B}", "Topology/osmo-topology"]
    assert summary.unchanged == [f"Queue/{n}" for n in (ROOT, TEAM, SHARED)]
    assert sync_namespace(namespace="osmo", api=cluster.api()).changed is False


def test_a_500_during_deletes_converges_next_time(cluster, team) -> None:
    sync_namespace(namespace="osmo", api=cluster.api())
    for subpool in team.subpools.all():
        pool_services.subpool_delete(actor=None, subpool=subpool)
    cluster.fail_next("DELETE", B, 500)
    with pytest.raises(KaiSyncError):
        sync_namespace(namespace="osmo", api=cluster.api())
    assert cluster.names("queues") == sorted([ROOT, TEAM, SHARED, B])
    assert sync_namespace(namespace="osmo", api=cluster.api()).deleted == [f"Queue/{B}"]
    assert cluster.names("queues") == sorted([ROOT, TEAM, SHARED])


def test_create_conflict_adopts_an_unlabelled_object(cluster, team) -> None:
    stray = build_queue_hierarchy([], "osmo")[0]
    stray["metadata"]["labels"] = {}
    stray["spec"]["priority"] = 7
    cluster.put_object("queues", stray)
    summary = sync_namespace(namespace="osmo", api=cluster.api())
    assert f"Queue/{ROOT}" in summary.replaced
    assert cluster.objects[("queues", ROOT)]["metadata"]["labels"]["osmo.namespace"] == "osmo"
    assert sync_namespace(namespace="osmo", api=cluster.api()).changed is False


def test_topology_node_labels_change_by_recreate(cluster) -> None:
    api = cluster.api()
    sync_objects(api, [build_topology("osmo")], namespace="osmo")
    renamed = build_topology("osmo", levels=[("zone", "topology.osmo/zone"),
                                             ("hostname", "kubernetes.io/hostname")])
    cluster.requests.clear()
    summary = sync_objects(api, [renamed], namespace="osmo")
    assert summary.replaced == ["Topology/osmo-topology"]
    assert [r[0] for r in cluster.writes()] == ["DELETE", "POST"]
    alias_only = build_topology("osmo", levels=[("region", "topology.osmo/zone"),
                                                ("host", "kubernetes.io/hostname")])
    cluster.requests.clear()
    sync_objects(api, [alias_only], namespace="osmo")
    assert [r[0] for r in cluster.writes()] == ["PUT"]


def test_dry_run_writes_nothing(cluster, team) -> None:
    summary = sync_namespace(namespace="osmo", api=cluster.api(), dry_run=True)
    assert summary.dry_run and len(summary.created) == 6
    assert cluster.writes() == [] and cluster.objects == {}


def test_only_queues_and_topologies_are_synced(cluster) -> None:
    with pytest.raises(ValueError, match="not a Queue or Topology"):
        sync_objects(cluster.api(), [{"apiVersion": "v1", "kind": "Pod"}], namespace="osmo")


def kubeconfig(tmp_path, cluster) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: emu\n"
        f"clusters:\n- name: emu\n  cluster:\n    server: {cluster.url}\n"
        "contexts:\n- name: emu\n  context:\n    cluster: emu\n    user: me\n"
        "users:\n- name: me\n  user: {}\n")
    return str(path)


def test_management_command_dry_run_then_apply(cluster, team, tmp_path, capsys) -> None:
    config = kubeconfig(tmp_path, cluster)
    call_command("kai_sync", "--dry-run", "--kubeconfig", config)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"create Queue/{ROOT}"
    assert out[-1] == "plan: created 6, replaced 0, deleted 0, unchanged 0"
    assert cluster.objects == {}
    call_command("kai_sync", "--kubeconfig", config, "--namespace", "prod")
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "done: created 6, replaced 0, deleted 0, unchanged 0"
    assert "osmo-default-prod" in cluster.names("queues")
    cluster.fail_next("GET", None, 500)
    with pytest.raises(CommandError, match="kai sync failed"):
        call_command("kai_sync", "--kubeconfig", config)
    with pytest.raises(CommandError, match="kai sync failed"):
        call_command("kai_sync", "--kubeconfig", str(tmp_path / "missing"))


def test_celery_task_syncs_only_when_enabled(cluster, team, settings, monkeypatch) -> None:
    monkeypatch.setattr(sync, "custom_objects_api", lambda **_: cluster.api())
    settings.OSMO_KAI_SYNC = False
    assert tasks.kai_queue_sync() == {"skipped": True}
    assert cluster.requests == []
    settings.OSMO_KAI_SYNC = True
    result = tasks.kai_queue_sync()
    assert len(result["created"]) == 6 and result["dry_run"] is False
    assert tasks.kai_queue_sync(namespace="osmo")["unchanged"] == \
        [f"Queue/{n}" for n in (ROOT, TEAM, SHARED, A, B)] + ["Topology/osmo-topology"]


def test_task_retries_on_api_errors_bounded() -> None:
    assert KaiSyncError in tasks.kai_queue_sync.autoretry_for
    assert tasks.kai_queue_sync.max_retries == 6
    assert tasks.kai_queue_sync.retry_backoff is True


def test_sync_enabled_reads_the_setting_only(settings, monkeypatch) -> None:
    settings.OSMO_KAI_SYNC = False
    monkeypatch.setenv("OSMO_KAI_SYNC", "yes")  # read once, by settings: not here
    assert sync.sync_enabled() is False
    settings.OSMO_KAI_SYNC = True
    monkeypatch.setenv("OSMO_KAI_SYNC", "0")
    assert sync.sync_enabled() is True


def test_on_commit_dispatch_is_a_no_op_without_a_cluster(settings,
                                                         django_capture_on_commit_callbacks):
    settings.OSMO_KAI_SYNC = False
    with django_capture_on_commit_callbacks() as callbacks:
        tasks.queue_sync_on_commit()
    assert callbacks == []


def test_on_commit_dispatch_survives_a_broker_outage(settings, monkeypatch,
                                                     django_capture_on_commit_callbacks):
    settings.OSMO_KAI_SYNC = True
    sent = []

    def broken(*args, **kwargs):
        sent.append(kwargs)
        raise ConnectionError("broker down")

    monkeypatch.setattr(tasks.kai_queue_sync, "apply_async", broken)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        tasks.queue_sync_on_commit("osmo")
    assert len(callbacks) == 1
    assert sent == [{"kwargs": {"namespace": "osmo"}, "retry": False}]


def test_desired_objects_come_from_one_pool_query(team, django_assert_num_queries) -> None:
    # the pool tree, the stored cluster topology and the labels the nodes carry
    with django_assert_num_queries(3):
        objects = desired_cluster_objects(namespace="osmo")
    assert [o["kind"] for o in objects] == ["Queue"] * 5 + ["Topology"]


def test_the_topology_lists_only_the_levels_the_nodes_carry(db) -> None:
    """KAI leaves a node lacking one level's label out of every domain of a constrained gang:
    the default's ``block`` level, which these nodes do not carry, is left out."""
    assert [level["nodeLabel"] for level in
            topology_manifest(namespace="osmo")["spec"]["levels"]] == [
        ZONE_LABEL, BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL]  # no node known yet: all
    Node.objects.create(name="n1", gpus=8, labels={RACK_LABEL: "r1", ZONE_LABEL: "z",
                                                   HOSTNAME_LABEL: "n1"})
    Node.objects.create(name="n2", gpus=8, labels={RACK_LABEL: "r2"})
    assert [level["nodeLabel"] for level in
            topology_manifest(namespace="osmo")["spec"]["levels"]] == [
        ZONE_LABEL, RACK_LABEL, HOSTNAME_LABEL]
