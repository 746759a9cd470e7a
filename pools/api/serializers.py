"""Shapes of the pool API: request bodies (DRF serializers) and response objects.

Responses are built as plain dicts (the quota report renders thousands of rows per request); the
response serializers below describe the same shapes for the OpenAPI document, and a test keeps
the two in step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rest_framework import serializers

from osmo.config_changes import ConfigChangeSerializer
from osmo.exit_actions import ExitActionsError, parse_exit_actions
from osmo.serializers import (
    QueryBooleanField,
    QueryIntegerField,
    RequestSerializer,
    StrictCharField,
    StrictIntegerField,
    StringMapField,
)

from .. import node_sets, quota
from ..models import NAME_PATTERN, SUBPOOL_DELIMITER, Pool, PoolStatus, SubpoolState
from ..selectors import PoolTree

_NAME_RE = re.compile(NAME_PATTERN)
_LABEL_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*"
                           r"[A-Za-z0-9])?$")

# --- requests --------------------------------------------------------------------------------
# Validated by the views and the admin's pool form; the services receive typed values.

_NAME_HELP = (f"Matches {NAME_PATTERN} and never contains '{SUBPOOL_DELIMITER}' "
              f"(else 400 invalid_name).")


class PlatformSerializer(RequestSerializer):
    reject_unknown_fields = True

    description = StrictCharField(required=False, allow_blank=True)
    node_selector = StringMapField(required=False, help_text="Node label → value.")

    def validate_node_selector(self, selector: dict[str, str]) -> dict[str, str]:
        bad = [key for key in selector if not _LABEL_KEY_RE.match(key)]
        if bad:
            raise serializers.ValidationError(f"Not valid label names: {', '.join(bad)}.")
        return selector


class PoolUpsertSerializer(RequestSerializer):
    """Body of `PUT /api/configs/pool/{name}`; absent optional fields keep their value."""

    field_error_codes = {"quota_gpus": "invalid_quota", "limit_gpus": "invalid_quota"}

    quota_gpus = StrictIntegerField(min_value=0)
    limit_gpus = StrictIntegerField(required=False, allow_null=True, min_value=-1,
                                    help_text="-1 or null: no limit; else at least quota_gpus.")
    weight = StrictIntegerField(required=False, min_value=0)
    priority = StrictIntegerField(required=False)
    status = serializers.ChoiceField(choices=PoolStatus.choices, required=False)
    description = StrictCharField(required=False, allow_blank=True)
    platforms = serializers.DictField(child=PlatformSerializer(), required=False)
    default_platform = StrictCharField(required=False, allow_blank=True, allow_null=True,
                                       max_length=63, help_text="One of `platforms`.")

    default_exit_actions = serializers.DictField(
        required=False, help_text="COMPLETE / FAIL / RESCHEDULE → exit codes (\"1-5,10\"), "
                                  "for tasks whose exitActions do not hold their code.")
    max_retries = StrictIntegerField(required=False, min_value=0, max_value=100,
                                     help_text="Reschedules of one group at most (default 3).")
    backends = serializers.ListField(
        child=StrictCharField(max_length=63), required=False, min_length=1, max_length=16,
        help_text="Backend names in order of preference (default [\"default\"]); subpools "
                  "inherit them. Unknown name: 400 backend_not_found.")
    backend = StrictCharField(required=False, max_length=63, write_only=True,
                              help_text="OSMO's single field: the same as backends: [backend].")

    def validate_limit_gpus(self, limit: int | None) -> int:
        return -1 if limit is None else limit

    def validate_backends(self, backends: list[str]) -> list[str]:
        if len(set(backends)) != len(backends):
            raise serializers.ValidationError("A backend is listed once.")
        return backends

    def validate(self, attrs: dict) -> dict:
        single = attrs.pop("backend", None)
        if single is not None:
            if "backends" in attrs and attrs["backends"][:1] != [single]:
                raise serializers.ValidationError(
                    {"backend": ["Must be the first of backends, when both are given."]})
            attrs.setdefault("backends", [single])
        return attrs

    def validate_default_exit_actions(self, actions: dict) -> dict:
        try:
            return parse_exit_actions(actions)
        except ExitActionsError as exc:
            raise serializers.ValidationError(f"default_exit_actions{exc.path}: {exc}") from None

    def validate_platforms(self, platforms: dict) -> dict:
        bad = {name: ["Not a valid platform name: use lowercase letters, digits and '-'."]
               for name in platforms if not _NAME_RE.match(name)}
        if bad:
            raise serializers.ValidationError(bad)
        return platforms


class PoolChangeSerializer(ConfigChangeSerializer):
    """OSMO's body of `PATCH /api/configs/pool/{name}` (`osmo config update POOL NAME`):
    `configs_dict` holds some fields of PoolUpsertSerializer (the others keep their value),
    `description` and `tags` are the revision's."""

    configs_dict = serializers.DictField(help_text="Fields of the PUT body to change.")

    def validate_configs_dict(self, changes: dict) -> dict:
        unknown = sorted(set(changes) - set(PoolUpsertSerializer().fields))
        if unknown:
            raise serializers.ValidationError(
                f"Not a setting of a pool: {', '.join(k[:40] for k in unknown[:10])}.")
        return changes


class SubpoolCreateSerializer(RequestSerializer):
    field_error_codes = {"name": "invalid_name", "quota_gpus": "invalid_quota"}

    # The name's format is a domain rule (pools.services.validate_name, a CHECK constraint too),
    # shared with the admin and the dashboard; the shape is a string.
    name = StrictCharField(help_text=(
        f"Short name; the canonical name is {{parent}}{SUBPOOL_DELIMITER}{{name}}. {_NAME_HELP}"))
    quota_gpus = StrictIntegerField(min_value=0)


class SubpoolUpdateSerializer(RequestSerializer):
    field_error_codes = {"quota_gpus": "invalid_quota"}

    quota_gpus = StrictIntegerField(min_value=0)


class HistoryQuerySerializer(RequestSerializer):
    limit = QueryIntegerField(required=False, default=500,
                              help_text="At most this many events (1 to 5000).")

    def validate_limit(self, limit: int) -> int:
        return max(1, min(limit, 5000))


class PoolQuotaQuerySerializer(RequestSerializer):
    include_archived = QueryBooleanField(required=False, default=False,
                                         help_text="Also list ARCHIVED subpools.")
    pools = serializers.ListField(
        child=StrictCharField(), required=False, default=list,
        help_text="Only these pools (canonical names; repeat the parameter). `node_sets` keep "
                  "exactly these rows; `pools` keeps the top-level pools named or holding a "
                  "named subpool.")
    all_pools = QueryBooleanField(required=False, default=False,
                                  help_text="Every visible pool (what an empty `pools` means).")


# --- responses -------------------------------------------------------------------------------


def _iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def subpool_object(subpool: Pool, usage: quota.Usage) -> dict:
    effective = quota.effective_quota(subpool.subpool_state, subpool.quota_gpus)
    body = {
        "name": subpool.subpool_name,
        "canonical_name": subpool.name,
        "parent": subpool.parent_id,
        "quota_gpus": effective,
        "configured_quota_gpus": subpool.quota_gpus,
        "state": subpool.subpool_state,
        "used_gpus": usage.used_gpus,
        "total_usage_gpus": usage.total_usage_gpus,
        "available_gpus": quota.available(effective, usage.used_gpus),
        "created_at": _iso(subpool.created_at),
        "updated_at": _iso(subpool.updated_at),
    }
    if subpool.subpool_state == SubpoolState.DELETING:
        body["drain"] = {"running_workflows": usage.running_workflows,
                         "gpus_held": usage.total_usage_gpus}
    return body


def pool_object(pool: Pool, tree: PoolTree | None = None) -> dict:
    """The Pool object; subpools show their parent's inherited settings."""
    settings_source = pool.parent if pool.is_subpool else pool
    body = {
        "name": pool.name,
        "parent": pool.parent_id,
        "subpool_name": pool.subpool_name,
        "subpool_state": pool.subpool_state,
        "description": settings_source.description,
        "quota_gpus": (quota.effective_quota(pool.subpool_state, pool.quota_gpus)
                       if pool.is_subpool else pool.quota_gpus),
        "limit_gpus": settings_source.limit_gpus,
        "weight": settings_source.weight,
        "priority": settings_source.priority,
        "platforms": settings_source.platforms,
        "default_platform": settings_source.default_platform or None,
        "status": settings_source.status,
        "default_exit_actions": settings_source.default_exit_actions,
        "max_retries": settings_source.max_retries,
        "backends": list(settings_source.backends),
        "backend": settings_source.backends[0] if settings_source.backends else None,
        "created_at": _iso(pool.created_at),
        "updated_at": _iso(pool.updated_at),
    }
    if tree is not None and not pool.is_subpool:
        subpools = tree.subpools.get(pool.name, [])
        body["unallocated_gpus"] = quota.unallocated(
            pool.quota_gpus, [(s.subpool_state, s.quota_gpus) for s in subpools])
        body["subpools"] = [subpool_object(s, tree.usage_of(s))
                            for s in subpools]
    return body


def quota_report(tree: PoolTree, *, include_archived: bool,
                 nodes: list[node_sets.NodeCapacity] | None = None,
                 only: Iterable[str] = ()) -> dict:
    """`GET /api/pool_quota`: one row per top-level pool with its subpools (seed 002), and the
    same figures as the OSMO client reads them (`node_sets`, docs/API-OSMO-CLIENT.md) when
    `nodes` are given. `only`: canonical names to keep (empty: all)."""
    wanted = set(only)
    rows, client_rows = [], []
    total = used = total_usage = 0
    for parent in tree.parents:
        subpools = tree.subpools.get(parent.name, [])
        if wanted and parent.name not in wanted and not any(s.name in wanted for s in subpools):
            continue
        own = tree.usage_of(parent)
        unallocated = quota.unallocated(parent.quota_gpus,
                                        [(s.subpool_state, s.quota_gpus) for s in subpools])
        sub_rows = []
        family = [(parent, unallocated, own)]
        for subpool in subpools:
            if subpool.subpool_state == SubpoolState.ARCHIVED and not include_archived:
                continue
            usage = tree.usage_of(subpool)
            effective = quota.effective_quota(subpool.subpool_state, subpool.quota_gpus)
            sub_rows.append({
                "name": subpool.name,
                "status": parent.status,
                "subpool_state": subpool.subpool_state,
                "quota_gpus": effective,
                "used_gpus": usage.used_gpus,
                "total_usage_gpus": usage.total_usage_gpus,
                "available_gpus": quota.available(effective, usage.used_gpus),
                **({"drain": {"running_workflows": usage.running_workflows,
                              "gpus_held": usage.total_usage_gpus}}
                   if subpool.subpool_state == SubpoolState.DELETING else {}),
            })
            family.append((subpool, effective, usage))
            used += usage.used_gpus
            total_usage += usage.total_usage_gpus
        rows.append({
            "name": parent.name,
            "status": parent.status,
            "subpool_state": None,
            "total_quota_gpus": parent.quota_gpus,
            "quota_gpus": unallocated,
            "used_gpus": own.used_gpus,
            "total_usage_gpus": own.total_usage_gpus,
            "available_gpus": quota.available(unallocated, own.used_gpus),
            "subpools": sub_rows,
        })
        total += parent.quota_gpus
        used += own.used_gpus
        total_usage += own.total_usage_gpus
        client_rows += [(pool, parent, limit, usage) for pool, limit, usage in family
                        if not wanted or pool.name in wanted]
    report = {
        "pools": rows,
        "resource_sum": {"total_quota_gpus": total, "used_gpus": used,
                         "total_usage_gpus": total_usage,
                         "available_gpus": quota.available(total, used)},
    }
    if nodes is not None:
        sets, resource_sum = _client_node_sets(client_rows, nodes)
        report["node_sets"] = sets
        report["resource_sum"].update(resource_sum)
    return report


def _client_node_sets(client_rows, nodes: list[node_sets.NodeCapacity]) -> tuple[list, dict]:
    """OSMO's pool listing: pools that can use the same nodes grouped into one node set, each
    pool (parent or subpool) a row with its quota figures and its node set's capacity."""
    by_name = {node.name: node for node in nodes}
    sets: dict[frozenset[str], list[dict]] = {}
    summed = dict.fromkeys(("quota_used", "quota_free", "quota_limit", "total_usage"), 0)
    for pool, parent, limit, usage in client_rows:
        usable = node_sets.nodes_for(parent.platforms, parent.default_platform, nodes)
        capacity, free = node_sets.capacity(usable, by_name)
        figures = {"quota_used": usage.used_gpus,
                   "quota_free": quota.available(limit, usage.used_gpus),
                   "quota_limit": limit, "total_usage": usage.total_usage_gpus,
                   "total_capacity": capacity, "total_free": free}
        for key in summed:
            summed[key] += figures[key]
        sets.setdefault(usable, []).append({
            "name": pool.name, "description": parent.description, "status": parent.status,
            "resource_usage": figures})
    union = frozenset().union(*sets) if sets else frozenset()
    summed["total_capacity"], summed["total_free"] = node_sets.capacity(union, by_name)
    return [{"pools": rows} for rows in sets.values()], summed


def history_item(event) -> dict:
    return {"at": _iso(event.at), "actor": event.actor_name, "action": event.action,
            "pool": event.pool.name, "before": event.before, "after": event.after}


# --- response shapes for the OpenAPI document ------------------------------------------------


class DrainSerializer(serializers.Serializer):
    running_workflows = serializers.IntegerField()
    gpus_held = serializers.IntegerField()


class SubpoolSerializer(serializers.Serializer):
    name = serializers.CharField()
    canonical_name = serializers.CharField()
    parent = serializers.CharField()
    quota_gpus = serializers.IntegerField(help_text="Effective quota: 0 while DELETING.")
    configured_quota_gpus = serializers.IntegerField()
    state = serializers.ChoiceField(choices=SubpoolState.values)
    used_gpus = serializers.IntegerField()
    total_usage_gpus = serializers.IntegerField()
    available_gpus = serializers.IntegerField(help_text="May be negative while draining.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    drain = DrainSerializer(required=False, help_text="DELETING subpools only.")


class PoolSerializer(serializers.Serializer):
    name = serializers.CharField()
    parent = serializers.CharField(allow_null=True)
    subpool_name = serializers.CharField(allow_null=True)
    subpool_state = serializers.CharField(allow_null=True)
    description = serializers.CharField()
    quota_gpus = serializers.IntegerField()
    limit_gpus = serializers.IntegerField()
    weight = serializers.IntegerField()
    priority = serializers.IntegerField()
    platforms = serializers.DictField(child=PlatformSerializer())
    default_platform = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=["ONLINE", "OFFLINE", "MAINTENANCE"])
    default_exit_actions = serializers.DictField(child=serializers.CharField(),
                                                 help_text="Inherited by subpools.")
    max_retries = serializers.IntegerField(help_text="Inherited by subpools.")
    backends = serializers.ListField(child=serializers.CharField(),
                                     help_text="Inherited by subpools.")
    backend = serializers.CharField(allow_null=True, help_text="The first of backends.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    unallocated_gpus = serializers.IntegerField(required=False, help_text="Top-level pools.")
    subpools = SubpoolSerializer(many=True, required=False, help_text="Top-level pools.")


class SubRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    status = serializers.CharField()
    subpool_state = serializers.CharField()
    quota_gpus = serializers.IntegerField()
    used_gpus = serializers.IntegerField()
    total_usage_gpus = serializers.IntegerField()
    available_gpus = serializers.IntegerField()
    drain = DrainSerializer(required=False, help_text="DELETING subpools only.")


class ParentRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    status = serializers.CharField()
    subpool_state = serializers.CharField(allow_null=True)
    total_quota_gpus = serializers.IntegerField()
    quota_gpus = serializers.IntegerField(help_text="Unallocated share.")
    used_gpus = serializers.IntegerField()
    total_usage_gpus = serializers.IntegerField()
    available_gpus = serializers.IntegerField()
    subpools = SubRowSerializer(many=True)


class ResourceUsageSerializer(serializers.Serializer):
    quota_used = serializers.IntegerField(help_text="HIGH+NORMAL GPUs the pool's tasks hold.")
    quota_free = serializers.IntegerField(help_text="quota_limit - quota_used (may be negative).")
    quota_limit = serializers.IntegerField(
        help_text="A subpool's effective quota; a parent's unallocated share.")
    total_usage = serializers.IntegerField(help_text="GPUs the pool's tasks hold, all priorities.")
    total_capacity = serializers.IntegerField(
        help_text="GPUs of the schedulable nodes the pool can use (shared in its node set).")
    total_free = serializers.IntegerField(help_text="Of those, GPUs no task holds.")


class ResourceSumSerializer(ResourceUsageSerializer):
    total_quota_gpus = serializers.IntegerField()
    used_gpus = serializers.IntegerField()
    total_usage_gpus = serializers.IntegerField()
    available_gpus = serializers.IntegerField()


class NodeSetPoolSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="Canonical name (`team--a` for a subpool).")
    description = serializers.CharField()
    status = serializers.CharField()
    resource_usage = ResourceUsageSerializer()


class NodeSetSerializer(serializers.Serializer):
    pools = NodeSetPoolSerializer(many=True)


class PoolQuotaSerializer(serializers.Serializer):
    pools = ParentRowSerializer(many=True)
    node_sets = NodeSetSerializer(many=True, help_text=(
        "The same figures as the OSMO client lists them: pools that can use the same nodes "
        "form one node set (docs/API-OSMO-CLIENT.md)."))
    resource_sum = ResourceSumSerializer()


class HistoryItemSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    actor = serializers.CharField(allow_null=True)
    action = serializers.CharField()
    pool = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
