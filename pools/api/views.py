"""Pool REST endpoints (API.md "Pools"): shape and permissions only; writes go to services."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.accounts.roles import roles_for
from osmo.errors import Forbidden, OsmoError

from .. import quota, selectors, services
from ..models import SubpoolState
from . import serializers as s

POOL_FIELDS = ("description", "limit_gpus", "weight", "priority", "platforms",
               "default_platform", "status")


def request_object(request) -> dict:
    if not isinstance(request.data, dict):
        raise OsmoError("invalid_request", "The body must be a JSON object.")
    return request.data


def _require_platform_admin(roles) -> None:
    if not roles.platform_admin:
        raise Forbidden("Only platform admins (osmo-admin) can change top-level pools.")


def _require_pool_admin(roles, pool) -> None:
    if not roles.can_admin(pool.top_level_name):
        raise Forbidden(f"Only admins of pool '{pool.top_level_name}' (osmo-"
                        f"{pool.top_level_name}-admin) can manage its subpools.")


def _parent_for_subpools(request, parent_name: str):
    roles = roles_for(request.user)
    parent = selectors.pool_get(name=parent_name, roles=roles)
    return roles, parent


class PoolListView(APIView):
    @extend_schema(responses=s.PoolSerializer(many=True), summary="List visible pools")
    def get(self, request):
        tree = selectors.pool_tree(roles=roles_for(request.user))
        return Response([s.pool_object(p, tree) for p in tree.parents])


class PoolDetailView(APIView):
    @extend_schema(responses=s.PoolSerializer, summary="One pool (top-level or subpool)")
    def get(self, request, name: str):
        roles = roles_for(request.user)
        pool = selectors.pool_get(name=name, roles=roles)
        tree = None if pool.is_subpool else selectors.pool_tree(roles=roles, only=pool.name)
        return Response(s.pool_object(pool, tree))

    @extend_schema(request=s.PoolUpsertSerializer, responses={200: s.PoolSerializer,
                                                              201: s.PoolSerializer},
                   summary="Create, update or reactivate a top-level pool")
    def put(self, request, name: str):
        roles = roles_for(request.user)
        _require_platform_admin(roles)
        body = request_object(request)
        changes = {field: body[field] for field in POOL_FIELDS if field in body}
        pool, created = services.pool_upsert(actor=request.user, name=name,
                                             quota_gpus=body.get("quota_gpus"), **changes)
        tree = selectors.pool_tree(roles=roles, only=pool.name)
        return Response(s.pool_object(pool, tree),
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(responses={204: None}, summary="Archive a top-level pool")
    def delete(self, request, name: str):
        roles = roles_for(request.user)
        pool = selectors.pool_get(name=name, roles=roles)
        _require_platform_admin(roles)
        if pool.is_subpool:
            raise OsmoError("invalid_request",
                            f"'{name}' is a subpool: delete it with DELETE "
                            f"/api/configs/pool/{pool.parent_id}/subpool/{pool.subpool_name}.")
        services.pool_delete(actor=request.user, pool=pool)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PoolHistoryView(APIView):
    @extend_schema(responses=s.HistoryItemSerializer(many=True),
                   parameters=[OpenApiParameter("limit", int, description="At most this many "
                                                "events (default 500).")],
                   summary="Audit events of a pool, newest first")
    def get(self, request, name: str):
        pool = selectors.pool_get(name=name, roles=roles_for(request.user))
        try:
            limit = max(1, min(int(request.query_params.get("limit", 500)), 5000))
        except ValueError as exc:
            raise OsmoError("invalid_request", "limit must be an integer.") from exc
        events = selectors.pool_history(pool=pool)[:limit]
        return Response([s.history_item(e) for e in events])


class SubpoolListView(APIView):
    @extend_schema(responses=s.SubpoolSerializer(many=True),
                   parameters=[OpenApiParameter("state", str, enum=SubpoolState.values)],
                   summary="Subpools of a pool, all states")
    def get(self, request, parent: str):
        roles, parent_pool = _parent_for_subpools(request, parent)
        state = request.query_params.get("state")
        if state is not None and state not in SubpoolState.values:
            raise OsmoError("invalid_request",
                            f"state must be one of {', '.join(SubpoolState.values)}.",
                            errors={"state": [f"Unknown state '{state}'."]})
        tree = selectors.pool_tree(roles=roles, only=parent_pool.top_level_name)
        subpools = [p for p in tree.subpools.get(parent_pool.name, [])
                    if state is None or p.subpool_state == state]
        return Response([s.subpool_object(p, tree.usage_of(p))
                         for p in subpools])

    @extend_schema(request=s.SubpoolCreateSerializer,
                   responses={201: s.SubpoolSerializer, 200: s.SubpoolSerializer},
                   summary="Create a subpool (or reactivate an ARCHIVED one)")
    def post(self, request, parent: str):
        roles, parent_pool = _parent_for_subpools(request, parent)
        _require_pool_admin(roles, parent_pool)
        body = request_object(request)
        subpool, created = services.subpool_create(
            actor=request.user, parent=parent_pool, subpool_name=body.get("name"),
            quota_gpus=body.get("quota_gpus"),
        )
        return Response(_subpool_body(subpool),
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


def _subpool_body(subpool) -> dict:
    usage = selectors.usage_by_pool([subpool.pk]).get(subpool.pk, quota.Usage())
    return s.subpool_object(subpool, usage)


class SubpoolDetailView(APIView):
    def _subpool(self, request, parent: str, subpool: str):
        roles, parent_pool = _parent_for_subpools(request, parent)
        _require_pool_admin(roles, parent_pool)
        if parent_pool.is_subpool:
            raise OsmoError("parent_is_subpool",
                            f"'{parent}' is a subpool; subpools cannot have subpools.")
        return selectors.subpool_get(parent=parent_pool, subpool_name=subpool)

    @extend_schema(request=s.SubpoolUpdateSerializer, responses=s.SubpoolSerializer,
                   summary="Change a subpool's quota (decreases are soft)")
    def put(self, request, parent: str, subpool: str):
        target = self._subpool(request, parent, subpool)
        body = request_object(request)
        updated = services.subpool_update(actor=request.user, subpool=target,
                                          quota_gpus=body.get("quota_gpus"))
        return Response(_subpool_body(updated))

    @extend_schema(responses={200: s.SubpoolSerializer, 202: s.SubpoolSerializer},
                   summary="Delete a subpool: ARCHIVED at once, or DELETING until drained")
    def delete(self, request, parent: str, subpool: str):
        target = self._subpool(request, parent, subpool)
        deleted = services.subpool_delete(actor=request.user, subpool=target)
        code = (status.HTTP_202_ACCEPTED if deleted.subpool_state == SubpoolState.DELETING
                and target.subpool_state == SubpoolState.ACTIVE else status.HTTP_200_OK)
        return Response(_subpool_body(deleted), status=code)


class PoolQuotaView(APIView):
    @extend_schema(responses=s.PoolQuotaSerializer,
                   parameters=[OpenApiParameter("include_archived", bool)],
                   summary="Quota figures of every visible pool and its subpools")
    def get(self, request):
        include_archived = request.query_params.get("include_archived", "").lower() in {
            "1", "true", "yes"}
        tree = selectors.pool_tree(roles=roles_for(request.user),
                                   include_archived_subpools=include_archived, light=True)
        return Response(s.quota_report(tree, include_archived=include_archived))
