"""The pool rows become the scheduler core's queues directly, and the Queue manifests are written
from those same queues: what a real cluster reads back from the manifests is what the embedded
loop schedules with."""

from __future__ import annotations

from scheduler.core.decode import queue_of
from scheduler.core.model import Queue, ResourceQuota
from scheduler.kai.queues import PoolData, SubpoolData, build_queue_hierarchy, queue_tree

POOLS = [
    PoolData(name="team", quota_gpus=100, limit_gpus=120, weight=2, priority=150,
             subpools=(SubpoolData("team--a", "ACTIVE", 30), SubpoolData("team--b", "DELETING", 8),
                       SubpoolData("team--old", "ARCHIVED", 50))),
    PoolData(name="x" * 70, quota_gpus=4),  # a name KAI's label rules shorten
]


def test_the_core_queues_come_from_the_rows() -> None:
    core = {q.queue.name: q.queue for q in queue_tree(POOLS, "osmo")}
    assert core["osmo-pool-osmo-team"] == Queue(
        name="osmo-pool-osmo-team", parent="osmo-default-osmo", priority=150,
        gpu=ResourceQuota(quota=100, limit=120, over_quota_weight=2))
    assert core["osmo-pool-osmo-team.shared"].gpu == ResourceQuota(70, -1, 2)  # 100 − 30
    assert core["osmo-pool-osmo-team--b"].gpu == ResourceQuota(0, -1, 2)  # DELETING
    assert "osmo-pool-osmo-team--old" not in core
    assert core["osmo-default-osmo"] == Queue(name="osmo-default-osmo",
                                              gpu=ResourceQuota(-1, -1, 1))


def test_the_manifests_read_back_as_the_same_queues() -> None:
    assert [queue_of(manifest) for manifest in build_queue_hierarchy(POOLS, "osmo")] == [
        q.queue for q in queue_tree(POOLS, "osmo")]
