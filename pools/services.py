"""Every write to pools and subpools: atomic, under row locks, with an audit event.

Lock order is fixed: the top-level pool row first, then a subpool row. Every change that can move
Σ ACTIVE subpool quotas or the parent quota locks the parent row, so the invariant
Σ ACTIVE subpool quotas ≤ parent quota holds under any concurrency.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from osmo import config_history, events
from osmo.errors import Conflict, OsmoError

from . import ports
from . import quota as quota_math
from .drain import drain_check_on_commit
from .locking import lock_pool_family
from .models import (
    NAME_PATTERN,
    SNAPSHOT_DEFAULTS,
    SUBPOOL_DELIMITER,
    Pool,
    PoolEvent,
    PoolUsageSample,
    SubpoolState,
)
from .selectors import active_subpool_quota_sum, usage_by_pool

_NAME_RE = re.compile(NAME_PATTERN)


# --- domain rules shared by the API, the admin and the dashboard ----------------------------
# Types and shapes are checked before a service is called: by the request serializers
# (pools.api.serializers) and by the admin's and the dashboard's forms.

def validate_name(name: str, *, what: str = "pool") -> str:
    if not _NAME_RE.match(name) or SUBPOOL_DELIMITER in name:
        raise OsmoError(
            "invalid_name",
            f"'{name}' is not a valid {what} name: use 1-40 lowercase letters, digits and '-', "
            f"starting and ending with a letter or digit, and never '{SUBPOOL_DELIMITER}'.",
            errors={"name": [f"Must match {NAME_PATTERN} and must not contain "
                             f"'{SUBPOOL_DELIMITER}'."]},
        )
    return name


def validate_quota(value: int, *, field: str = "quota_gpus") -> int:
    if value < 0:
        raise OsmoError(
            "invalid_quota",
            f"{field} must be a non-negative whole number of GPUs, not {value!r}.",
            errors={field: ["Must be a non-negative integer."]},
        )
    return value


def _invalid(field: str, message: str) -> OsmoError:
    return OsmoError("invalid_request", message, errors={field: [message]})


def _validate_limit(limit: int | None, quota_gpus: int) -> None:
    if limit is not None and limit != -1 and limit < quota_gpus:
        raise OsmoError("invalid_quota",
                        f"limit_gpus ({limit}) cannot be below quota_gpus ({quota_gpus}).",
                        errors={"limit_gpus": ["Must be -1 or at least quota_gpus."]})


def _validate_backends(names: list[str]) -> None:
    missing = ports.backends().missing(names)
    if missing:
        raise OsmoError("backend_not_found",
                        f"No backend named {', '.join(repr(n) for n in missing)}.",
                        errors={"backends": [f"Unknown backend: {n}." for n in missing]})


# --- audit -----------------------------------------------------------------------------------

_UNSET = object()
_TOP_LEVEL_FIELDS = ("quota_gpus", "limit_gpus", "weight", "priority", "description",
                     "platforms", "default_platform", "status", "backends",
                     "default_exit_actions", "max_retries")


def pool_snapshot(pool: Pool) -> dict[str, Any]:
    if pool.is_subpool:
        return {"name": pool.name, "subpool_name": pool.subpool_name,
                "state": pool.subpool_state, "quota_gpus": pool.quota_gpus}
    snapshot = {"name": pool.name, **{f: getattr(pool, f) for f in _TOP_LEVEL_FIELDS
                                      if getattr(pool, f) != SNAPSHOT_DEFAULTS.get(f, _UNSET)}}
    snapshot["archived"] = pool.archived_at is not None
    return snapshot


def _audit(pool: Pool, action: str, actor, before: dict | None, after: dict | None) -> None:
    """The audit event, which is also the POOL config's next revision (taken last: every row
    lock of the change is held by now)."""
    user = actor if getattr(actor, "is_authenticated", False) else None
    note = config_history.current_note(f"{action.replace('_', ' ').capitalize()}: {pool.name}")
    PoolEvent.objects.create(pool=pool, action=action, actor=user,
                             actor_name=user.get_username() if user else None,
                             before=before, after=after,
                             revision=config_history.next_revision(PoolEvent,
                                                                   config_history.POOL),
                             description=note.description, tags=list(note.tags))


def _changed(pool: Pool) -> None:
    """Announce the change (the KAI queue hierarchy follows it), once this change commits."""
    events.publish(events.PoolChanged(pool=pool.name))


def _archived(pool: Pool) -> None:
    events.publish(events.PoolArchived(pool=pool.name))


def _refresh_partition(parent: Pool) -> None:
    """Recount the parent's ACTIVE subpools into its row (locked by the caller)."""
    parent.allocated_gpus = active_subpool_quota_sum(parent=parent)
    parent.active_subpools = parent.subpools.filter(subpool_state=SubpoolState.ACTIVE).count()
    Pool.objects.filter(pk=parent.pk).update(allocated_gpus=parent.allocated_gpus,
                                             active_subpools=parent.active_subpools)


def _lock(pk: int) -> Pool:
    lock_pool_family(pk, shared=False)
    return Pool.objects.select_for_update().get(pk=pk)


def _lock_family(subpool: Pool) -> tuple[Pool, Pool]:
    """Lock the family, the parent row, then the subpool row (the fixed lock order)."""
    parent = _lock(subpool.parent.pk)
    subpool = Pool.objects.select_for_update().get(pk=subpool.pk)
    subpool.parent = parent
    return parent, subpool


# --- top-level pools -------------------------------------------------------------------------

@transaction.atomic
def pool_upsert(*, actor, name: str, quota_gpus: int, **changes: Any) -> tuple[Pool, bool]:
    """Create, update or reactivate a top-level pool. Returns (pool, created).

    `changes` are validated settings (limit_gpus, weight, priority, status, description,
    platforms, default_platform); absent ones keep their value."""
    validate_name(name)
    quota_gpus = validate_quota(quota_gpus)
    existing = Pool.objects.filter(name=name, parent__isnull=True).values_list("pk", flat=True)
    pool = _lock(existing[0]) if existing else None
    effective = {f: getattr(pool, f) for f in _TOP_LEVEL_FIELDS} if pool else {}
    effective.update(changes)
    _validate_limit(changes.get("limit_gpus"), quota_gpus)
    default_platform = effective.get("default_platform") or ""
    if default_platform and default_platform not in (effective.get("platforms") or {}):
        raise _invalid("default_platform",
                       f"default_platform '{default_platform}' is not one of the pool's "
                       f"platforms.")
    changes["default_platform"] = default_platform
    if "backends" in changes:
        _validate_backends(changes["backends"])

    if pool is None:
        try:
            with transaction.atomic():
                pool = Pool.objects.create(name=name, quota_gpus=quota_gpus, **changes)
        except IntegrityError:
            # A concurrent creator won: fall through to an update of its row.
            pool = _lock(Pool.objects.get(name=name, parent__isnull=True).pk)
        else:
            _audit(pool, "pool_created", actor, None, pool_snapshot(pool))
            _changed(pool)
            return pool, True

    before = pool_snapshot(pool)
    allocated = active_subpool_quota_sum(parent=pool)
    if quota_gpus < allocated:
        raise Conflict(
            "quota_exceeds_parent",
            f"Pool '{name}' cannot go to {quota_gpus} GPUs: its ACTIVE subpools hold "
            f"{allocated}. Shrink or delete subpools first.",
        )
    reactivated = pool.archived_at is not None
    pool.quota_gpus = quota_gpus
    for field, value in changes.items():
        setattr(pool, field, value)
    pool.archived_at = None
    after = pool_snapshot(pool)
    if after != before:  # a PUT that changes nothing writes nothing
        pool.save()
        _audit(pool, "pool_reactivated" if reactivated else "pool_updated", actor, before, after)
        _changed(pool)
    return pool, False


@transaction.atomic
def pool_delete(*, actor, pool: Pool) -> Pool:
    """Archive a top-level pool; refuse while it has alive workflows or live subpools."""
    pool = _lock(pool.pk)
    live_subpools = list(
        pool.subpools.exclude(subpool_state=SubpoolState.ARCHIVED).values_list("name", flat=True)
    )
    pool_ids = [pool.pk, *pool.subpools.values_list("pk", flat=True)]
    alive = ports.workflows().alive_count(pool_ids)
    if alive or live_subpools:
        parts = []
        if alive:
            parts.append(f"{alive} alive workflow(s)")
        if live_subpools:
            parts.append(f"subpools not yet archived ({', '.join(sorted(live_subpools))})")
        raise Conflict("pool_in_use", f"Pool '{pool.name}' is in use: {' and '.join(parts)}.")
    before = pool_snapshot(pool)
    pool.archived_at = timezone.now()
    pool.save(update_fields=["archived_at", "updated_at"])
    _audit(pool, "pool_archived", actor, before, pool_snapshot(pool))
    _changed(pool)
    _archived(pool)
    return pool


# --- subpools --------------------------------------------------------------------------------

def _quota_exceeds_parent(parent: Pool, others: int, requested: int) -> Conflict:
    unallocated = quota_math.unallocated(parent.quota_gpus, allocated=others)
    return Conflict(
        "quota_exceeds_parent",
        f"Pool '{parent.name}' has {parent.quota_gpus} GPUs, {others} of them already in ACTIVE "
        f"subpools: {unallocated} unallocated, {requested} requested.",
    )


@transaction.atomic
def subpool_create(*, actor, parent: Pool, subpool_name: str, quota_gpus: int
                   ) -> tuple[Pool, bool]:
    """Create a subpool, or reactivate an ARCHIVED one of that name. Returns (pool, created)."""
    if parent.is_subpool:
        raise OsmoError("parent_is_subpool",
                        f"'{parent.name}' is a subpool; subpools cannot have subpools.")
    validate_name(subpool_name, what="subpool")
    quota_gpus = validate_quota(quota_gpus)
    parent = _lock(parent.pk)
    existing = Pool.objects.select_for_update().filter(
        parent=parent, subpool_name=subpool_name
    ).first()
    if existing is not None and existing.subpool_state != SubpoolState.ARCHIVED:
        raise Conflict("subpool_exists",
                       f"Subpool '{existing.name}' already exists ({existing.subpool_state}).")
    others = active_subpool_quota_sum(parent=parent)
    if not quota_math.fits_in_parent(parent.quota_gpus, others, quota_gpus):
        raise _quota_exceeds_parent(parent, others, quota_gpus)

    if existing is None:
        subpool = Pool.objects.create(
            name=f"{parent.name}{SUBPOOL_DELIMITER}{subpool_name}", parent=parent,
            subpool_name=subpool_name, subpool_state=SubpoolState.ACTIVE, quota_gpus=quota_gpus,
        )
        _audit(subpool, "subpool_created", actor, None, pool_snapshot(subpool))
    else:
        subpool, before = existing, pool_snapshot(existing)
        subpool.subpool_state = SubpoolState.ACTIVE
        subpool.quota_gpus = quota_gpus
        subpool.save(update_fields=["subpool_state", "quota_gpus", "updated_at"])
        _audit(subpool, "subpool_reactivated", actor, before, pool_snapshot(subpool))
    subpool.parent = parent
    _refresh_partition(parent)
    _changed(subpool)
    return subpool, existing is None


@transaction.atomic
def subpool_update(*, actor, subpool: Pool, quota_gpus: int) -> Pool:
    """Change an ACTIVE subpool's quota. Decreases are soft: nothing running is evicted."""
    quota_gpus = validate_quota(quota_gpus)
    parent, subpool = _lock_family(subpool)
    if subpool.subpool_state != SubpoolState.ACTIVE:
        raise Conflict("subpool_not_active",
                       f"Subpool '{subpool.name}' is {subpool.subpool_state}; only ACTIVE "
                       f"subpools can change quota.")
    others = active_subpool_quota_sum(parent=parent, exclude_pk=subpool.pk)
    if not quota_math.fits_in_parent(parent.quota_gpus, others, quota_gpus):
        raise _quota_exceeds_parent(parent, others, quota_gpus)
    before = pool_snapshot(subpool)
    if quota_gpus != subpool.quota_gpus:
        subpool.quota_gpus = quota_gpus
        subpool.save(update_fields=["quota_gpus", "updated_at"])
        _audit(subpool, "subpool_quota_changed", actor, before, pool_snapshot(subpool))
        _refresh_partition(parent)
        _changed(subpool)
    return subpool


@transaction.atomic
def subpool_delete(*, actor, subpool: Pool) -> Pool:
    """Smart delete: cancel what holds no GPUs yet; ARCHIVED at once if nothing runs, else
    DELETING until the running workflows finish. Idempotent for DELETING/ARCHIVED."""
    parent, subpool = _lock_family(subpool)
    if subpool.subpool_state != SubpoolState.ACTIVE:
        return subpool
    before = pool_snapshot(subpool)
    workflows = ports.workflows()
    workflows.cancel_not_started(pool=subpool, reason="subpool_deleted")
    running = workflows.any_holding_gpus([subpool.pk])
    subpool.subpool_state = SubpoolState.DELETING if running else SubpoolState.ARCHIVED
    subpool.save(update_fields=["subpool_state", "updated_at"])
    _refresh_partition(parent)
    _audit(subpool, "subpool_deleting" if running else "subpool_archived", actor, before,
           pool_snapshot(subpool))
    if running:
        drain_check_on_commit(subpool_id=subpool.pk)
    else:
        _archived(subpool)
    _changed(subpool)
    return subpool


@transaction.atomic
def subpool_archive_if_drained(*, subpool_id: int) -> bool:
    """DELETING → ARCHIVED once no alive workflow remains; a conditional update makes repeated
    or concurrent runs do the transition (and write the audit event) exactly once."""
    subpool = Pool.objects.select_for_update(skip_locked=True).filter(
        pk=subpool_id, subpool_state=SubpoolState.DELETING
    ).first()
    if subpool is None or ports.workflows().pools_with_alive([subpool.pk]):
        return False
    before = pool_snapshot(subpool)
    changed = Pool.objects.filter(pk=subpool.pk, subpool_state=SubpoolState.DELETING).update(
        subpool_state=SubpoolState.ARCHIVED, updated_at=timezone.now()
    )
    if not changed:
        return False
    subpool.subpool_state = SubpoolState.ARCHIVED
    _audit(subpool, "subpool_archived", None, before, pool_snapshot(subpool))
    _changed(subpool)
    _archived(subpool)
    return True


@transaction.atomic
def usage_samples_record(*, now, retention_hours: int) -> int:
    """One usage sample per live pool and subpool (one aggregate query), and samples older
    than ``retention_hours`` dropped; returns how many were written. Idempotent per instant."""
    usage = usage_by_pool()
    pools = (Pool.objects.filter(archived_at__isnull=True)
             .exclude(subpool_state=SubpoolState.ARCHIVED)
             .values_list("pk", "parent_id", "subpool_state", "quota_gpus"))
    samples = []
    for pk, parent, state, quota_gpus in pools:
        held = usage.get(pk, quota_math.Usage())
        samples.append(PoolUsageSample(
            pool_id=pk, at=now, used_gpus=held.used_gpus,
            low_gpus=held.total_usage_gpus - held.used_gpus,
            quota_gpus=quota_math.effective_quota(state, quota_gpus) if parent else quota_gpus))
    PoolUsageSample.objects.bulk_create(samples, ignore_conflicts=True)
    PoolUsageSample.objects.filter(at__lt=now - timedelta(hours=retention_hours)).delete()
    return len(samples)


@transaction.atomic
def pools_forget_backend(*, actor, backend: str) -> list[str]:
    """Take a deleted backend's name out of every pool that lists it (a forced delete of the
    backend, in its transaction); returns those pools' names."""
    names = []
    # Every pool locked before the first revision is written (the revision lock comes last).
    pools = [_lock(pk) for pk in (Pool.objects.filter(parent__isnull=True,
                                                      backends__contains=[backend])
                                  .order_by("pk").values_list("pk", flat=True))]
    for pool in pools:
        before = pool_snapshot(pool)
        pool.backends = [name for name in pool.backends if name != backend]
        pool.save(update_fields=["backends", "updated_at"])
        _audit(pool, "pool_updated", actor, before, pool_snapshot(pool))
        _changed(pool)
        names.append(pool.name)
    return names


@transaction.atomic
def pool_revision_restore(*, actor, event: PoolEvent) -> Pool:
    """Roll one pool or subpool back to the config its revision recorded, through the service
    that change would take, so every rule holds as it would for that update (a subpool quota
    above the parent's unallocated share is refused, a pool in use is not archived)."""
    pool, target = event.pool, event.after or {}
    if not pool.is_subpool:
        if target.get("archived"):
            current = _lock(pool.pk)
            return current if current.archived_at else pool_delete(actor=actor, pool=current)
        fields = {f: target[f] for f in _TOP_LEVEL_FIELDS if f in target and f != "quota_gpus"}
        return pool_upsert(actor=actor, name=pool.name, quota_gpus=target["quota_gpus"],
                           **fields)[0]
    parent, subpool = _lock_family(pool)
    if parent.archived_at is not None:
        raise Conflict("pool_archived", f"Pool '{parent.name}' is archived: restore it before "
                                        f"its subpool '{subpool.name}'.")
    if target.get("state") != SubpoolState.ACTIVE:
        if subpool.subpool_state == SubpoolState.ACTIVE:
            return subpool_delete(actor=actor, subpool=subpool)
        return subpool
    if subpool.subpool_state == SubpoolState.ARCHIVED:
        return subpool_create(actor=actor, parent=parent, subpool_name=subpool.subpool_name,
                              quota_gpus=target["quota_gpus"])[0]
    return subpool_update(actor=actor, subpool=subpool, quota_gpus=target["quota_gpus"])


@transaction.atomic
def pool_revision_tag(*, revision: int, add: list[str], remove: list[str]) -> PoolEvent:
    """Tags added to and taken from a POOL revision (OSMO's `config tag`); nothing else of a
    revision ever changes."""
    event = PoolEvent.objects.select_for_update().get(revision=revision)
    event.tags = config_history.retagged(event.tags, add=add, remove=remove)
    event.save(update_fields=["tags"])
    return event
