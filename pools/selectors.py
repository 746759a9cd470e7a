"""Reads: pool lookups with visibility, the pool tree, and usage aggregated in one query."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

from django.db.models import Q, Sum

from osmo.accounts.roles import Roles
from osmo.errors import Forbidden, NotFound

from . import ports, quota
from .models import Pool, PoolEvent, SubpoolState


def pool_not_found(name: str) -> NotFound:
    return NotFound("pool_not_found", f"Pool '{name}' does not exist.")


def _live_pools():
    """Pools that exist for users: archived top-level pools (and their subpools) are hidden."""
    return Pool.objects.filter(archived_at__isnull=True).exclude(parent__archived_at__isnull=False)


def pool_get(*, name: str, roles: Roles, for_update: bool = False) -> Pool:
    """A live, visible pool by canonical name, else 404 `pool_not_found` (no existence leak)."""
    queryset = _live_pools().select_related("parent")
    if for_update:
        queryset = queryset.select_for_update(of=("self",))
    pool = queryset.filter(name=name).first()
    if pool is None or not roles.can_view(pool.top_level_name):
        raise pool_not_found(name)
    return pool


def pool_get_for_write(*, name: str, roles: Roles) -> Pool:
    """Like pool_get, but a known pool the caller may not use is 403 (API.md: acceptable for
    writes), so a user learns to ask for access rather than to check the name."""
    pool = _live_pools().select_related("parent").filter(name=name).first()
    if pool is None:
        raise pool_not_found(name)
    if not roles.can_view(pool.top_level_name):
        raise Forbidden(f"You have no role on pool '{pool.top_level_name}'.")
    return pool


def subpool_get(*, parent: Pool, subpool_name: str) -> Pool:
    subpool = Pool.objects.select_related("parent").filter(
        parent=parent, subpool_name=subpool_name
    ).first()
    if subpool is None:
        raise NotFound("subpool_not_found",
                       f"Pool '{parent.name}' has no subpool '{subpool_name}'.")
    return subpool


def active_subpool_quota_sum(*, parent: Pool, exclude_pk: int | None = None) -> int:
    queryset = Pool.objects.filter(parent=parent, subpool_state=SubpoolState.ACTIVE)
    if exclude_pk is not None:
        queryset = queryset.exclude(pk=exclude_pk)
    return queryset.aggregate(total=Sum("quota_gpus"))["total"] or 0


def visible_top_level_pools(*, roles: Roles):
    queryset = _live_pools().filter(parent__isnull=True)
    visible = roles.visible_q("name")
    return queryset if visible is None else queryset.filter(visible)


@dataclass
class PoolTree:
    """Visible top-level pools with their subpools and usage, from a fixed number of queries.

    `parents` and `subpools` hold Pool instances, or light `QuotaRow`s for the quota report,
    which renders thousands of rows per request.
    """

    parents: list
    subpools: dict[str, list] = field(default_factory=dict)
    usage: dict[int, quota.Usage] = field(default_factory=dict)

    def usage_of(self, pool) -> quota.Usage:
        return self.usage.get(pool.pk, quota.Usage())


class QuotaRow(NamedTuple):
    pk: int
    name: str
    parent_id: str | None
    subpool_state: str | None
    quota_gpus: int
    status: str
    description: str
    platforms: dict
    default_platform: str


def pool_tree(*, roles: Roles, include_archived_subpools: bool = True,
              only: str | None = None, light: bool = False) -> PoolTree:
    """One query for the pools and one for their usage."""
    visible = roles.visible_q("name")
    parent_visible = roles.visible_q("parent__name")
    queryset = _live_pools().filter(
        Q(parent__isnull=True) & (visible or Q())
        | Q(parent__isnull=False) & (parent_visible or Q())
    )
    if only is not None:
        queryset = queryset.filter(Q(name=only) | Q(parent_id=only))
    if not include_archived_subpools:
        queryset = queryset.exclude(subpool_state=SubpoolState.ARCHIVED)
    queryset = queryset.order_by("parent_id", "name")
    if light:
        pools = [QuotaRow(*row) for row in queryset.values_list(*QuotaRow._fields)]
    else:
        pools = list(queryset)
    parents = [p for p in pools if p.parent_id is None]
    by_name = {p.name: p for p in parents}
    subpools: dict[str, list] = defaultdict(list)
    for pool in pools:
        if pool.parent_id is not None and pool.parent_id in by_name:
            if not light:
                pool.parent = by_name[pool.parent_id]  # inherited settings without a query
            subpools[pool.parent_id].append(pool)
    # Usage over every bound task is cheaper than a filter by a long list of pool ids.
    usage = usage_by_pool(None if roles.platform_admin or len(pools) > 200
                          else [p.pk for p in pools])
    return PoolTree(parents=parents, subpools=dict(subpools), usage=usage)


def usage_by_pool(pool_ids: list[int] | None = None) -> dict[int, quota.Usage]:
    """GPUs held per pool, split by priority, with the workflows holding them: ONE aggregate
    over the workflows' tasks (read through `pools.ports.workflows`)."""
    if pool_ids is not None and not pool_ids:
        return {}
    return ports.workflows().usage_by_pool(pool_ids)


def pool_history(*, pool: Pool):
    """A pool's audit events, newest first; a parent's history includes its subpools'."""
    condition = Q(pool=pool)
    if pool.parent_id is None:
        condition |= Q(pool__parent=pool)
    return PoolEvent.objects.filter(condition).select_related("pool").order_by("-at", "-id")


def submittable_pool_names(*, roles: Roles) -> list[str]:
    """Canonical names of the visible pools a workflow can be submitted to: top-level pools and
    their ACTIVE subpools, sorted."""
    visible = roles.visible_q("name")
    parent_visible = roles.visible_q("parent__name")
    queryset = _live_pools().filter(
        Q(parent__isnull=True) & (visible or Q())
        | Q(subpool_state=SubpoolState.ACTIVE) & (parent_visible or Q()))
    return sorted(queryset.values_list("name", flat=True))


def pools_naming_backends(names: list[str] | None = None) -> dict[str, list[str]]:
    """Backend name → the live top-level pools that name it (subpools inherit theirs), by
    pool name; only `names` when given."""
    pools = Pool.objects.filter(parent__isnull=True, archived_at__isnull=True)
    if names is not None:
        pools = pools.filter(backends__overlap=names)
    by_backend: dict[str, list[str]] = defaultdict(list)
    for pool_name, backends in pools.order_by("name").values_list("name", "backends"):
        for backend in backends:
            if names is None or backend in names:
                by_backend[backend].append(pool_name)
    return dict(by_backend)


def served_by_q(backend: str, *, pool_field: str = "pool") -> Q:
    """Rows whose pool (``pool_field``: the path to it) is served by ``backend``: a top-level
    pool naming it, or a subpool of one (subpools inherit their parent's backends)."""
    return (Q(**{f"{pool_field}__parent__isnull": True,
                 f"{pool_field}__backends__contains": [backend]})
            | Q(**{f"{pool_field}__parent__isnull": False,
                   f"{pool_field}__parent__backends__contains": [backend]}))


# --- the POOL config's revisions (its audit events) ------------------------------------------

def pool_revisions():
    """Every pool's and subpool's revisions (osmo/config_history.py), for history lists."""
    return PoolEvent.objects.select_related("pool")


def pool_config_at(revision: int) -> dict:
    """The POOL config as it stood at `revision`: each pool's and subpool's last recorded
    config up to it, archived ones left out (as OSMO's data of a POOL revision, keyed by
    canonical name)."""
    latest = (PoolEvent.objects.filter(revision__lte=revision)
              .order_by("pool_id", "-revision").distinct("pool_id")
              .values_list("after", flat=True))
    pools = {}
    for after in latest:
        if not after or after.get("archived") or after.get("state") == SubpoolState.ARCHIVED:
            continue
        pools[after["name"]] = after
    return {"pools": dict(sorted(pools.items()))}
