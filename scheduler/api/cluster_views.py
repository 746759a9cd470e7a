"""Cluster and scheduler endpoints (API.md "Cluster and scheduler (embedded backend)")."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.accounts.roles import roles_for
from osmo.errors import Forbidden, NotFound
from scheduler.core.kai_names import DEFAULT_TOPOLOGY_NAME
from scheduler.kai.selectors import cluster_topology
from workflows.selectors import workflow_get
from workflows.spec.units import format_bytes

from .. import selectors, services
from ..backends.default import embedded_backend_check
from ..backends.embedded import cycle as embedded_cycle
from ..backends.selectors import backend_get
from ..models import Node
from . import serializers as s


def _platform_admin(request) -> None:
    if not roles_for(request.user).platform_admin:
        raise Forbidden("Only platform admins (osmo-admin) manage the cluster.")


def node_object(node: Node, used_gpus: int) -> dict:
    return {"name": node.name, "gpus": node.gpus, "gpus_free": node.gpus - used_gpus,
            "cpu": node.cpu_millis / 1000 if node.cpu_millis % 1000 else node.cpu_millis // 1000,
            "memory": format_bytes(node.memory_bytes), "labels": node.labels,
            "schedulable": node.schedulable, "backend": node.backend}


class NodeListView(APIView):
    @extend_schema(responses=s.NodeSerializer(many=True), parameters=[s.NodeListQuerySerializer],
                   summary="The cluster's nodes")
    def get(self, request):
        query = s.NodeListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        nodes = Node.objects.all()
        if query.validated_data.get("backend"):
            nodes = nodes.filter(backend=query.validated_data["backend"])
        used = selectors.gpus_used_by_node()
        return Response([node_object(n, used.get(n.name, 0)) for n in nodes])

    @extend_schema(request=s.NodeInSerializer,
                   responses={201: s.NodeSerializer, 200: s.NodeSerializer},
                   summary="Register or replace a node")
    def post(self, request):
        _platform_admin(request)
        body = s.NodeInSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        embedded_backend_check(body.validated_data["backend"])  # a cluster's come from it
        node, created = services.node_register(**body.validated_data)
        used = selectors.gpus_used_by_node().get(node.name, 0)
        return Response(node_object(node, used), status=201 if created else 200)


def _node(name: str) -> Node:
    node = Node.objects.filter(name=name).first()
    if node is None:
        raise NotFound("node_not_found", f"Node '{name}' does not exist.")
    return node


class NodeDetailView(APIView):
    @extend_schema(request=s.NodePatchSerializer, responses=s.NodeSerializer,
                   summary="Cordon (schedulable: false) or uncordon a node; bound work stays")
    def patch(self, request, name: str):
        _platform_admin(request)
        node = _node(name)
        body = s.NodePatchSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        node = services.node_set_schedulable(node=node,
                                             schedulable=body.validated_data["schedulable"])
        return Response(node_object(node, selectors.gpus_used_by_node().get(node.name, 0)))

    @extend_schema(responses={204: None}, parameters=[s.NodeDeleteQuerySerializer],
                   summary="Remove a node (409 node_in_use while pods are bound, unless force)")
    def delete(self, request, name: str):
        _platform_admin(request)
        node = _node(name)
        query = s.NodeDeleteQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        services.node_delete(node=node, force=query.validated_data["force"])
        return Response(status=204)


class TopologyView(APIView):
    @extend_schema(responses=s.TopologySerializer,
                   summary="The cluster Topology, coarsest first")
    def get(self, request):
        return Response({"name": DEFAULT_TOPOLOGY_NAME, "levels": cluster_topology()})

    @extend_schema(request=s.TopologySerializer, responses=s.TopologySerializer,
                   summary="Replace the topology levels (placed work is not moved)")
    def put(self, request):
        _platform_admin(request)
        body = s.TopologySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        topology = services.topology_replace(levels=body.validated_data["levels"])
        return Response({"name": topology.name, "levels": topology.levels})


CycleSerializer = inline_serializer("Cycle", {
    "bound": serializers.IntegerField(), "evicted": serializers.IntegerField(),
    "pending": serializers.IntegerField(), "duration_ms": serializers.FloatField()})


class CycleView(APIView):
    @extend_schema(request=None, responses=CycleSerializer, summary="Run one cycle now")
    def post(self, request):
        _platform_admin(request)
        return Response(embedded_cycle.cycles_run().as_dict())


class SchedulerStatusView(APIView):
    @extend_schema(responses=inline_serializer("SchedulerStatus", {
        "last_cycle": serializers.DictField(allow_null=True),
        "queues": serializers.ListField(child=serializers.DictField()),
        "pending": serializers.ListField(child=serializers.DictField())}),
        parameters=[s.SchedulerStatusQuerySerializer],
        summary="Last cycle figures, per-queue shares, pending gangs with reasons")
    def get(self, request):
        query = s.SchedulerStatusQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        backend = backend_get(query.validated_data["backend"]).name
        return Response(selectors.scheduler_status(roles=roles_for(request.user),
                                                   user=request.user, backend=backend))


class ExplainView(APIView):
    @extend_schema(responses=inline_serializer("Explain", {
        "workflow": serializers.CharField(),
        "groups": serializers.ListField(child=serializers.DictField())}),
        summary="Why a workflow is pending: the scheduler's reasons per group, and the start "
                "estimate of a group holding a reservation")
    def get(self, request, name: str):
        workflow = workflow_get(name=name, roles=roles_for(request.user), user=request.user)
        return Response(selectors.explain(workflow))
