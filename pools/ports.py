"""What the pools app reads from the apps above it, declared here and provided by them
(`osmo.ports` lists every port)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from osmo.ports import Port

if TYPE_CHECKING:  # node_sets reads through this port
    from .node_sets import NodeCapacity
    from .quota import Usage


class PoolWorkflows(Protocol):
    """The workflows in pools, as the pool services and reports need them."""

    def usage_by_pool(self, pool_ids: list[int] | None) -> dict[int, Usage]:
        """GPUs held per pool (all pools when ``pool_ids`` is None), in one aggregate."""

    def alive_count(self, pool_ids: list[int]) -> int:
        """Alive (pending or running) workflows in these pools."""

    def pools_with_alive(self, pool_ids: list[int]) -> set[int]:
        """Those of these pools that hold an alive workflow."""

    def any_holding_gpus(self, pool_ids: list[int]) -> bool:
        """Does an alive workflow in these pools hold GPUs?"""

    def cancel_not_started(self, *, pool, reason: str) -> list[str]:
        """Cancel the pool's alive workflows that hold no GPUs yet, in the caller's
        transaction (a subpool's delete); returns their names."""


class ClusterNodes(Protocol):
    def schedulable_nodes(self) -> list[NodeCapacity]:
        """Schedulable nodes with the GPUs bound tasks hold on them."""


class PoolBackends(Protocol):
    def missing(self, names: list[str]) -> list[str]:
        """Those of these backend names no backend has, in their order."""


workflows: Port[PoolWorkflows] = Port("pools.ports.workflows")
cluster: Port[ClusterNodes] = Port("pools.ports.cluster")
backends: Port[PoolBackends] = Port("pools.ports.backends")
