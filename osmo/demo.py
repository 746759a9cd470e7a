"""Demo data for `osmo standalone --demo`: seed 002's example pool tree. Idempotent."""

from __future__ import annotations

from django.db import transaction

from pools import services
from pools.models import Pool

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
        from osmo.accounts.services import user_ensure

        user_ensure(username=user, groups=[group])
