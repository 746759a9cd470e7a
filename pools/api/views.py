"""Pool REST endpoints (API.md "Pools"): shape and permissions only; writes go to services."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo import config_history
from osmo.accounts.roles import roles_for
from osmo.errors import Forbidden, OsmoError

from .. import node_sets, quota, selectors, services
from ..models import Pool, SubpoolState
from . import serializers as s
from .filters import SubpoolFilter


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


def _require_top_level(parent) -> None:
    # Checked before the body, the order API.md lists the codes in (the service checks it too).
    if parent.is_subpool:
        raise OsmoError("parent_is_subpool",
                        f"'{parent.name}' is a subpool; subpools cannot have subpools.")


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
        services.validate_name(name)  # the path's name is refused before the body's fields
        body = s.PoolUpsertSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        pool, created = services.pool_upsert(actor=request.user, name=name,
                                             **body.validated_data)
        tree = selectors.pool_tree(roles=roles, only=pool.name)
        return Response(s.pool_object(pool, tree),
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(request=s.PoolChangeSerializer, responses=s.PoolSerializer,
                   summary="Change some settings of a top-level pool (OSMO's config update)")
    def patch(self, request, name: str):
        roles = roles_for(request.user)
        _require_platform_admin(roles)
        pool = selectors.pool_get(name=name, roles=roles)
        if pool.is_subpool:
            raise OsmoError("invalid_request",
                            f"'{name}' is a subpool: change its quota with PUT "
                            f"/api/configs/pool/{pool.parent_id}/subpool/{pool.subpool_name}.")
        change = s.PoolChangeSerializer(data=request.data)
        change.is_valid(raise_exception=True)
        body = s.PoolUpsertSerializer(data={"quota_gpus": pool.quota_gpus,
                                            **change.validated_data["configs_dict"]})
        body.is_valid(raise_exception=True)
        with config_history.noted(change.note()):
            pool, _ = services.pool_upsert(actor=request.user, name=name,
                                           **body.validated_data)
        tree = selectors.pool_tree(roles=roles, only=pool.name)
        return Response(s.pool_object(pool, tree))

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
                   parameters=[s.HistoryQuerySerializer],
                   summary="Audit events of a pool, newest first")
    def get(self, request, name: str):
        pool = selectors.pool_get(name=name, roles=roles_for(request.user))
        query = s.HistoryQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        events = selectors.pool_history(pool=pool)[:query.validated_data["limit"]]
        return Response([s.history_item(e) for e in events])


class SubpoolListView(GenericAPIView):
    queryset = Pool.objects.filter(parent__isnull=False)
    filterset_class = SubpoolFilter
    pagination_class = None  # a plain JSON array (API.md)

    @extend_schema(responses=s.SubpoolSerializer(many=True),
                   summary="Subpools of a pool, all states")
    def get(self, request, parent: str):
        _, parent_pool = _parent_for_subpools(request, parent)
        subpools = list(self.filter_queryset(self.get_queryset().filter(parent=parent_pool)))
        usage = selectors.usage_by_pool([p.pk for p in subpools])
        return Response([s.subpool_object(p, usage.get(p.pk, quota.Usage()))
                         for p in subpools])

    @extend_schema(request=s.SubpoolCreateSerializer,
                   responses={201: s.SubpoolSerializer, 200: s.SubpoolSerializer},
                   summary="Create a subpool (or reactivate an ARCHIVED one)")
    def post(self, request, parent: str):
        roles, parent_pool = _parent_for_subpools(request, parent)
        _require_pool_admin(roles, parent_pool)
        _require_top_level(parent_pool)
        body = s.SubpoolCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        subpool, created = services.subpool_create(
            actor=request.user, parent=parent_pool, subpool_name=body.validated_data["name"],
            quota_gpus=body.validated_data["quota_gpus"],
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
        _require_top_level(parent_pool)
        return selectors.subpool_get(parent=parent_pool, subpool_name=subpool)

    @extend_schema(request=s.SubpoolUpdateSerializer, responses=s.SubpoolSerializer,
                   summary="Change a subpool's quota (decreases are soft)")
    def put(self, request, parent: str, subpool: str):
        target = self._subpool(request, parent, subpool)
        body = s.SubpoolUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        updated = services.subpool_update(actor=request.user, subpool=target,
                                          quota_gpus=body.validated_data["quota_gpus"])
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
                   parameters=[s.PoolQuotaQuerySerializer],
                   summary="Quota figures of every visible pool and its subpools")
    def get(self, request):
        query = s.PoolQuotaQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        include_archived = query.validated_data["include_archived"]
        tree = selectors.pool_tree(roles=roles_for(request.user),
                                   include_archived_subpools=include_archived, light=True)
        only = () if query.validated_data["all_pools"] else query.validated_data["pools"]
        return Response(s.quota_report(tree, include_archived=include_archived,
                                       nodes=node_sets.schedulable_nodes(), only=only))


class PoolConfigView(PoolQuotaView):
    """`GET /api/pool`: the quota report, its `pools` keyed by name (every pool and subpool of
    the node sets), as OSMO's pool listing (the client's `resource list` looks names up in
    it)."""

    @extend_schema(responses=dict, parameters=[s.PoolQuotaQuerySerializer],
                   summary="Visible pools by name, with their node sets")
    def get(self, request):
        report = super().get(request).data
        report["pools"] = {row["name"]: row for node_set in report["node_sets"]
                           for row in node_set["pools"]}
        return Response(report)
