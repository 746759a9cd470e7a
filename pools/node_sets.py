"""Which cluster nodes a pool can use, and the pools that share the same nodes (node sets).

A pool's tasks run on the nodes their platform selects (`platforms.<name>.node_selector`; a task
without a platform takes the pool's `default_platform`; a subpool inherits its parent's
settings): a node belongs to the pool when its labels hold every pair of at least one platform's
selector. A pool without platforms or without a default platform (its tasks may then run with no
selector), or with a platform whose selector is empty, can use every node. Cordoned nodes count
for no pool. Pools that can use exactly the same
nodes form one node set; their capacity is shared, not added up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from . import ports


@dataclass(frozen=True)
class NodeCapacity:
    name: str
    labels: Mapping[str, str]
    gpus: int
    gpus_used: int

    @property
    def gpus_free(self) -> int:
        return max(0, self.gpus - self.gpus_used)


def schedulable_nodes() -> list[NodeCapacity]:
    """Schedulable nodes with the GPUs bound tasks hold on them (the scheduler app's nodes:
    read through `pools.ports.cluster`)."""
    return ports.cluster().schedulable_nodes()


def selectors_of(platforms: Mapping | None,
                 default_platform: str | None = None) -> list[dict[str, str]] | None:
    """The node selectors of a pool's platforms; None when the pool may use every node."""
    if not platforms or default_platform not in platforms:
        return None
    selectors = []
    for platform in platforms.values():
        selector = (platform or {}).get("node_selector") or {}
        if not selector:
            return None
        selectors.append(dict(selector))
    return selectors or None


def nodes_for(platforms: Mapping | None, default_platform: str | None,
              nodes: Iterable[NodeCapacity]) -> frozenset[str]:
    selectors = selectors_of(platforms, default_platform)
    return frozenset(
        node.name for node in nodes
        if selectors is None or any(all(node.labels.get(key) == value
                                        for key, value in selector.items())
                                    for selector in selectors))


def capacity(node_names: Iterable[str], nodes: Mapping[str, NodeCapacity]) -> tuple[int, int]:
    """(total GPUs, free GPUs) over these nodes."""
    chosen = [nodes[name] for name in node_names]
    return sum(node.gpus for node in chosen), sum(node.gpus_free for node in chosen)
