"""What the workflows app lends the pools app below it: the `pools.ports.workflows` port
(`osmo.ports` lists every port). Connected by `WorkflowsConfig.ready()`."""

from __future__ import annotations

from pools import ports as pool_ports
from pools.quota import Usage

from . import lifecycle, selectors


class PoolWorkflows:
    """`pools.ports.PoolWorkflows` over the workflows tables."""

    def usage_by_pool(self, pool_ids: list[int] | None) -> dict[int, Usage]:
        return selectors.usage_by_pool(pool_ids)

    def alive_count(self, pool_ids: list[int]) -> int:
        return selectors.alive_workflows(pool_ids=pool_ids).count()

    def pools_with_alive(self, pool_ids: list[int]) -> set[int]:
        return selectors.pools_with_alive_workflows(pool_ids)

    def any_holding_gpus(self, pool_ids: list[int]) -> bool:
        return selectors.workflows_holding_gpus(pool_ids=pool_ids).exists()

    def cancel_not_started(self, *, pool, reason: str) -> list[str]:
        return lifecycle.workflows_cancel_not_started(pool=pool, reason=reason)


def connect() -> None:
    pool_ports.workflows.provide(PoolWorkflows())
