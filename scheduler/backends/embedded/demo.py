"""Demo data for `osmo standalone --demo`: seed 002's example pool tree. Idempotent."""

from __future__ import annotations

from django.db import transaction

from osmo.accounts.services import user_ensure
from pools import services
from pools.models import Pool
from scheduler.core.kai_names import BLOCK_LABEL, HOSTNAME_LABEL, RACK_LABEL, ZONE_LABEL
from scheduler.models import Node
from scheduler.services import node_register

DEMO_POOLS = {
    "team": (100, {"a": 30, "b": 40, "c": 20}),
    "research": (64, {"vision": 16, "speech": 16}),
    "inference": (32, {}),
}


@transaction.atomic
def seed_demo() -> None:
    for name, (quota_gpus, subpools) in DEMO_POOLS.items():
        if Pool.objects.filter(name=name).exists():
            continue
        parent, _ = services.pool_upsert(
            actor=None, name=name, quota_gpus=quota_gpus, description=f"Demo pool {name}",
            platforms={"dgx-h100": {"description": "DGX H100 nodes",
                                    "node_selector": {"nvidia.com/gpu.product": "H100"}}},
            default_platform="dgx-h100",
        )
        for subpool, subpool_quota in subpools.items():
            services.subpool_create(actor=None, parent=parent, subpool_name=subpool,
                                    quota_gpus=subpool_quota)
    for user, group in (("team-admin", "osmo-team-admin"), ("ml-user", "osmo-team*-user")):
        user_ensure(username=user, groups=[group])
    seed_demo_cluster()


def seed_demo_cluster(zones: int = 2, racks: int = 4, nodes_per_rack: int = 4) -> None:
    """2 zones × 4 racks × 4 nodes × 8 H100 GPUs: 256 GPUs with topology labels."""
    if Node.objects.exists():
        return
    for zone in range(zones):
        for rack in range(racks):
            for index in range(nodes_per_rack):
                name = f"dgx-z{zone}-r{rack}-{index}"
                node_register(name=name, gpus=8, cpu_millis=224_000,
                              memory_bytes=2 * 1024**4, labels={
                                  ZONE_LABEL: f"zone-{zone}",
                                  BLOCK_LABEL: f"zone-{zone}-block-{rack // 2}",
                                  RACK_LABEL: f"zone-{zone}-rack-{rack}",
                                  HOSTNAME_LABEL: name,
                                  "nvidia.com/gpu.product": "H100"})
