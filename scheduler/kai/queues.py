"""The KAI Queue hierarchy (``scheduling.run.ai/v2``) and the default Topology. Pure.

Exactly SCHEDULING.md "Queue hierarchy"::

    osmo-default-{ns}                     root: gpu quota -1, limit -1
    └── osmo-pool-{ns}-{pool}             gpu quota = pool quota, limit = pool limit (-1 = none)
        ├── osmo-pool-{ns}-{pool}.shared  gpu quota = unallocated (pool − Σ ACTIVE subpool quotas)
        └── osmo-pool-{ns}-{pool}--{sub}  gpu quota = subpool quota (0 while DELETING)

Input is plain data (:class:`PoolData`), never the ORM, so the builder is shared by the REST
view, the cluster sync, the benchmark and tests. The pool data becomes the scheduler core's
``Queue`` objects (:func:`queue_tree`: what the embedded loop schedules with) and the manifests
are written from those same objects (:func:`queue_manifest`: what a real cluster gets).

Decisions where the documents are silent:

- Every queue carries gpu, cpu and memory with explicit quota/limit/overQuotaWeight; cpu and
  memory are -1/-1/1 everywhere. The root's gpu overQuotaWeight is 1 and its priority 100
  (KAI's default), so the root never competes with anything.
- The ``.shared`` quota is clamped at 0: the services keep Σ ACTIVE ≤ pool quota, but a
  negative quota would be rejected by KAI, and the clamp makes the builder total.
- Pool ``status`` (ONLINE/OFFLINE/MAINTENANCE) does not remove queues: running work keeps its
  queue; admission is what stops new work.
- Names longer than 63 characters (a label value) are shortened with
  :func:`scheduler.core.kai_names.label_value` (truncate + ``-`` + 8 hex of sha256 of the full
  name), the same function the pod labels use, so ``spec.queue``, the pods'
  ``kai.scheduler/queue`` label and the Queue name always agree. Every non-root queue carries
  annotation ``osmo/pool-name`` (the canonical pool name, never shortened); a shortened queue
  also carries ``osmo/queue-name`` (its full name). ``osmo.pool`` (label) is shortened alike.
- The root has label ``osmo.namespace`` but no ``osmo.pool``; the ``.shared`` leaf has the
  parent's ``osmo.pool``. All OSMO objects carry ``app.kubernetes.io/managed-by: osmo``.
- Order of the output: root, then per pool (by name) the pool queue, ``.shared``, then its
  subpool leaves by name — parents always before children (the order to create them in).
- The Topology is cluster-scoped and named ``osmo-topology``; it carries ``osmo.namespace`` so
  the sync finds it, and its levels are ``{alias, nodeLabel}`` coarsest first (CRD v1alpha1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pools.quota import unallocated
from scheduler.core.kai_names import (  # noqa: F401 - also this module's public names
    DEFAULT_TOPOLOGY_LEVELS,
    DEFAULT_TOPOLOGY_NAME,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    NAMESPACE_LABEL,
    POOL_LABEL,
    POOL_NAME_ANNOTATION,
    QUEUE_API_VERSION,
    QUEUE_KIND,
    QUEUE_NAME_ANNOTATION,
    SHARED_SUFFIX,
    SUBPOOL_DELIMITER,
    TOPOLOGY_API_VERSION,
    TOPOLOGY_KIND,
    label_value,
    pool_queue_full_name,
    pool_queue_name,
    queue_name_for,
    root_queue_full_name,
    root_queue_name,
    shared_queue_full_name,
    shared_queue_name,
)
from scheduler.core.model import Queue, ResourceQuota

UNLIMITED = -1
DEFAULT_QUEUE_PRIORITY = 100

ACTIVE, DELETING, ARCHIVED = "ACTIVE", "DELETING", "ARCHIVED"


@dataclass(frozen=True)
class SubpoolData:
    """A subpool as the builder needs it. ``name`` is the canonical ``{parent}--{sub}``."""

    name: str
    state: str
    quota_gpus: int


@dataclass(frozen=True)
class PoolData:
    """A top-level pool and its subpools (any state; ARCHIVED ones are skipped)."""

    name: str
    quota_gpus: int
    limit_gpus: int = UNLIMITED
    weight: int = 1
    priority: int = DEFAULT_QUEUE_PRIORITY
    subpools: tuple[SubpoolData, ...] = field(default_factory=tuple)
    archived: bool = False

    @property
    def unallocated_gpus(self) -> int:
        """Pool quota − Σ ACTIVE subpool quotas (seed 002), never below 0."""
        return max(0, unallocated(self.quota_gpus, [(s.state, s.quota_gpus)
                                                    for s in self.subpools]))


# --- the hierarchy: the scheduler core's queues, straight from the pool rows -------------------

@dataclass(frozen=True)
class KaiQueue:
    """One queue of the hierarchy: the core type the scheduler reads (its name and parent
    already as KAI spells them) and what its manifest adds."""

    queue: Queue
    full_name: str  # before shortening; annotated when it was shortened
    pool: str | None  # the canonical pool name (label and annotation); None for the root


def _kai_queue(full_name: str, *, parent: str | None, pool: str | None, gpu: ResourceQuota,
               priority: int) -> KaiQueue:
    return KaiQueue(Queue(name=label_value(full_name), parent=parent, priority=priority,
                          gpu=gpu), full_name=full_name, pool=pool)


def root_queue(namespace: str) -> KaiQueue:
    return _kai_queue(root_queue_full_name(namespace), parent=None, pool=None,
                      gpu=ResourceQuota(UNLIMITED, UNLIMITED, 1), priority=DEFAULT_QUEUE_PRIORITY)


def pool_queues(pool: PoolData, namespace: str) -> list[KaiQueue]:
    """The container queue of a live top-level pool, its ``.shared`` leaf and its subpool
    leaves (ACTIVE and DELETING; none for ARCHIVED). ``[]`` for an archived pool."""
    if pool.archived:
        return []
    container = pool_queue_name(pool.name, namespace)
    limit = UNLIMITED if pool.limit_gpus is None or pool.limit_gpus < 0 else pool.limit_gpus
    queues = [
        _kai_queue(pool_queue_full_name(pool.name, namespace), parent=root_queue_name(namespace),
                   pool=pool.name, gpu=ResourceQuota(pool.quota_gpus, limit, pool.weight),
                   priority=pool.priority),
        _kai_queue(shared_queue_full_name(pool.name, namespace), parent=container,
                   pool=pool.name,
                   gpu=ResourceQuota(pool.unallocated_gpus, UNLIMITED, pool.weight),
                   priority=pool.priority),
    ]
    for subpool in sorted(pool.subpools, key=lambda s: s.name):
        if subpool.state not in (ACTIVE, DELETING):
            continue
        quota = subpool.quota_gpus if subpool.state == ACTIVE else 0
        queues.append(_kai_queue(pool_queue_full_name(subpool.name, namespace),
                                 parent=container, pool=subpool.name,
                                 gpu=ResourceQuota(quota, UNLIMITED, pool.weight),
                                 priority=pool.priority))
    return queues


def queue_tree(pools: Iterable[PoolData], namespace: str) -> list[KaiQueue]:
    """Root, then every live pool's queues, parents before children."""
    queues = [root_queue(namespace)]
    for pool in sorted(pools, key=lambda p: p.name):
        queues.extend(pool_queues(pool, namespace))
    return queues


# --- manifests, from the same queues ---------------------------------------------------------

def _resources(queue: Queue) -> dict[str, dict[str, int]]:
    return {resource: {"quota": quota.quota, "limit": quota.limit,
                       "overQuotaWeight": quota.over_quota_weight}
            for resource, quota in (("gpu", queue.gpu), ("cpu", queue.cpu),
                                    ("memory", queue.memory))}


def queue_manifest(kai_queue: KaiQueue, namespace: str) -> dict[str, Any]:
    queue = kai_queue.queue
    labels = {MANAGED_BY_LABEL: MANAGED_BY, NAMESPACE_LABEL: namespace}
    annotations: dict[str, str] = {}
    if kai_queue.pool is not None:
        labels[POOL_LABEL] = label_value(kai_queue.pool)
        annotations[POOL_NAME_ANNOTATION] = kai_queue.pool
    if queue.name != kai_queue.full_name:
        annotations[QUEUE_NAME_ANNOTATION] = kai_queue.full_name
    metadata: dict[str, Any] = {"name": queue.name, "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    spec: dict[str, Any] = {}
    if queue.parent is not None:
        spec["parentQueue"] = queue.parent
    spec["priority"] = queue.priority
    spec["resources"] = _resources(queue)
    return {"apiVersion": QUEUE_API_VERSION, "kind": QUEUE_KIND, "metadata": metadata,
            "spec": spec}


def build_root_queue(namespace: str) -> dict[str, Any]:
    return queue_manifest(root_queue(namespace), namespace)


def build_pool_queues(pool: PoolData, namespace: str) -> list[dict[str, Any]]:
    return [queue_manifest(queue, namespace) for queue in pool_queues(pool, namespace)]


def build_queue_hierarchy(pools: Iterable[PoolData], namespace: str) -> list[dict[str, Any]]:
    """Root, then every live pool's queues, parents before children."""
    return [queue_manifest(queue, namespace) for queue in queue_tree(pools, namespace)]


def build_topology(namespace: str, *, name: str = DEFAULT_TOPOLOGY_NAME,
                   levels: Sequence[tuple[str | None, str] | Mapping[str, str]]
                   = DEFAULT_TOPOLOGY_LEVELS) -> dict[str, Any]:
    """The cluster Topology (``kai.scheduler/v1alpha1``), levels coarsest first."""
    spec_levels = []
    for level in levels:
        if isinstance(level, Mapping):
            alias, label = level.get("alias"), level["nodeLabel"]
        else:
            alias, label = level
        spec_levels.append({"alias": alias, "nodeLabel": label} if alias
                           else {"nodeLabel": label})
    return {
        "apiVersion": TOPOLOGY_API_VERSION,
        "kind": TOPOLOGY_KIND,
        "metadata": {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY,
                                              NAMESPACE_LABEL: namespace}},
        "spec": {"levels": spec_levels},
    }


def parent_of(queue: Mapping[str, Any]) -> str | None:
    return (queue.get("spec") or {}).get("parentQueue")


def depth_order(queues: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Queue name → depth (root 0) within ``queues``; unknown parents count as roots."""
    by_name = {q["metadata"]["name"]: q for q in queues}
    depths: dict[str, int] = {}

    def depth(name: str, seen: frozenset[str] = frozenset()) -> int:
        if name in depths:
            return depths[name]
        parent = parent_of(by_name[name])
        if parent is None or parent not in by_name or parent in seen:
            result = 0
        else:
            result = depth(parent, seen | {name}) + 1
        depths[name] = result
        return result

    for name in by_name:
        depth(name)
    return depths
