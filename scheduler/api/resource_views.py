"""`osmo resource list|info` of NVIDIA's client: our nodes, per visible pool and platform, in
OSMO's resource shape (docs/API-OSMO-CLIENT.md "Resources").

A node is listed under a pool when the pool can use it (pools/node_sets.py: the pool's
platforms' node selectors; a subpool takes its parent's), under each platform whose selector
it matches — `default` for a pool that runs anywhere. Cordoned nodes serve no pool and are not
listed. Capacity and use: GPUs, CPU cores and memory (GiB) of the node and of the tasks bound
to it; this service has no ephemeral-storage figures (0).
"""

from __future__ import annotations

from django.db.models import Sum
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.accounts.roles import roles_for
from osmo.errors import NotFound
from osmo.serializers import QueryBooleanField, RequestSerializer
from pools import selectors as pool_selectors
from pools.models import SubpoolState
from pools.node_sets import selectors_of
from workflows.selectors import gpu_holding_tasks

from ..models import Node

GIB = 1024**3
ANYWHERE = "default"  # the platform name of a pool that may use every node


class ResourceQuerySerializer(RequestSerializer):
    pools = serializers.ListField(child=serializers.CharField(max_length=200), required=False,
                                  default=list, max_length=200)
    platforms = serializers.ListField(child=serializers.CharField(max_length=63),
                                      required=False, default=list, max_length=50)
    all_pools = QueryBooleanField(required=False, default=False)
    concise = QueryBooleanField(required=False, default=False)


def _platforms_by_pool(request) -> dict[str, dict[str, list[dict] | None]]:
    """Visible pools (subpools with their parent's platforms) → platform → its selectors
    (None: every node)."""
    tree = pool_selectors.pool_tree(roles=roles_for(request.user),
                                    include_archived_subpools=False)
    out = {}
    for parent in tree.parents:
        platforms = parent.platforms or {}
        if selectors_of(platforms, parent.default_platform) is None:  # every node
            by_platform = {name: None for name in platforms} or {ANYWHERE: None}
        else:
            by_platform = {name: [dict((p or {}).get("node_selector") or {})]
                           for name, p in platforms.items()}
        out[parent.name] = by_platform
        for subpool in tree.subpools.get(parent.name, []):
            if subpool.subpool_state == SubpoolState.ACTIVE:
                out[subpool.name] = by_platform
    return out


def _matches(labels: dict, selectors: list[dict] | None) -> bool:
    return selectors is None or any(all(labels.get(k) == v for k, v in s.items())
                                    for s in selectors)


def _entry(node: Node, pools: dict[str, list[str]], used: dict) -> dict:
    cores, memory = node.cpu_millis // 1000, node.memory_bytes // GIB
    use = used.get(node.name, {})
    flat = [f"{pool}/{platform}" for pool, platforms in pools.items() for platform in platforms]
    config = {"host_network": False, "privileged": False, "default_mounts": [],
              "allowed_mounts": []}
    return {
        "hostname": node.name,
        "backend": node.backend,
        "resource_type": "SHARED",
        "exposed_fields": {"node": node.name, "pool/platform": flat, "storage": "0",
                           "cpu": str(cores), "memory": str(memory), "gpu": str(node.gpus)},
        "taints": [],
        "conditions": ["Ready"],
        "allocatable_fields": {"storage": "0Gi", "cpu": cores, "memory": f"{memory}Gi",
                               "gpu": node.gpus},
        "usage_fields": {"storage": "0Gi", "cpu": (use.get("cpu") or 0) / 1000,
                         "memory": f"{(use.get('memory') or 0) / GIB:g}Gi",
                         "gpu": use.get("gpus") or 0},
        "non_workflow_usage_fields": {},
        "platform_allocatable_fields": None,
        "config_fields": {pool: {platform: config for platform in platforms}
                          for pool, platforms in pools.items()},
        "label_fields": dict(node.labels or {}),
        "pool_platform_labels": pools,
    }


def _resources(request, *, pools: list[str], platforms: list[str],
               node: str | None = None) -> list[dict]:
    visible = _platforms_by_pool(request)
    wanted = {name: visible[name] for name in (pools or visible) if name in visible}
    nodes = Node.objects.filter(schedulable=True).order_by("name")
    if node is not None:
        nodes = nodes.filter(name=node)
    used = {row["node_name"]: row for row in gpu_holding_tasks().values("node_name").annotate(
        gpus=Sum("gpus"), cpu=Sum("cpu_millis"), memory=Sum("memory_bytes"))}
    entries = []
    for candidate in nodes:
        labels = candidate.labels or {}
        placed = {pool: [name for name, selectors in by_platform.items()
                         if (not platforms or name in platforms) and _matches(labels, selectors)]
                  for pool, by_platform in wanted.items()}
        placed = {pool: names for pool, names in placed.items() if names}
        if placed:
            entries.append(_entry(candidate, placed, used))
    return entries


class ResourceListView(APIView):
    @extend_schema(parameters=[ResourceQuerySerializer], responses=dict,
                   operation_id="api_resources_list",
                   summary="Nodes of the visible pools (the OSMO client's `resource list`)")
    def get(self, request):
        query = ResourceQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        pools = [] if data["all_pools"] else data["pools"]
        return Response({"resources": _resources(request, pools=pools,
                                                 platforms=data["platforms"] if pools else [])})


class ResourceDetailView(APIView):
    @extend_schema(responses=dict, summary="One node (the OSMO client's `resource info`)")
    def get(self, request, name: str):
        found = _resources(request, pools=[], platforms=[], node=name)
        if not found:
            raise NotFound("resource_not_found", f"Resource {name} does not exist!")
        return Response({"resources": found})
