"""Cluster and scheduler endpoints (API.md "Cluster and scheduler (embedded backend)")."""

from __future__ import annotations

import re

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.accounts.roles import roles_for
from osmo.errors import Forbidden, NotFound, OsmoError
from scheduler.core.kai_names import DEFAULT_TOPOLOGY_NAME
from scheduler.kai.selectors import cluster_topology
from workflows.selectors import workflow_get
from workflows.spec.units import format_bytes, parse_bytes, parse_millicores

from .. import selectors, services
from ..models import Node

_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def _platform_admin(request) -> None:
    if not roles_for(request.user).platform_admin:
        raise Forbidden("Only platform admins (osmo-admin) manage the cluster.")


def _invalid(field: str, message: str) -> OsmoError:
    return OsmoError("invalid_request", message, errors={field: [message]})


def node_object(node: Node, used_gpus: int) -> dict:
    return {"name": node.name, "gpus": node.gpus, "gpus_free": node.gpus - used_gpus,
            "cpu": node.cpu_millis / 1000 if node.cpu_millis % 1000 else node.cpu_millis // 1000,
            "memory": format_bytes(node.memory_bytes), "labels": node.labels,
            "schedulable": node.schedulable}


class NodeSerializer(serializers.Serializer):
    name = serializers.CharField()
    gpus = serializers.IntegerField()
    gpus_free = serializers.IntegerField()
    cpu = serializers.FloatField(help_text="cores")
    memory = serializers.CharField(help_text="a Kubernetes quantity, e.g. 512Gi")
    labels = serializers.DictField(child=serializers.CharField())
    schedulable = serializers.BooleanField()


class NodeInSerializer(serializers.Serializer):
    name = serializers.CharField()
    gpus = serializers.IntegerField()
    cpu = serializers.FloatField(help_text="cores")
    memory = serializers.CharField(help_text="a Kubernetes quantity, e.g. 512Gi")
    labels = serializers.DictField(child=serializers.CharField())


class TopologySerializer(serializers.Serializer):
    name = serializers.CharField()
    levels = serializers.ListField(child=serializers.DictField())


def _node_fields(body) -> dict:
    if not isinstance(body, dict):
        raise OsmoError("invalid_request", "The body must be a JSON object.")
    name, gpus = body.get("name"), body.get("gpus")
    if not isinstance(name, str) or not _NODE_NAME.match(name):
        raise _invalid("name", "name must be a DNS subdomain (lowercase letters, digits, '-', "
                               "'.').")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise _invalid("gpus", "gpus must be a non-negative integer.")
    try:
        cpu = parse_millicores(body.get("cpu", 0))
        memory = parse_bytes(body.get("memory", 0))
    except (ValueError, TypeError) as error:
        raise _invalid("cpu" if "cpu" in str(error) else "memory", str(error)) from error
    labels = body.get("labels", {})
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in labels.items()):
        raise _invalid("labels", "labels maps label names to string values.")
    return {"name": name, "gpus": gpus, "cpu_millis": cpu, "memory_bytes": memory,
            "labels": labels}


class NodeListView(APIView):
    @extend_schema(responses=NodeSerializer(many=True), summary="The cluster's nodes")
    def get(self, request):
        used = selectors.gpus_used_by_node()
        return Response([node_object(n, used.get(n.name, 0)) for n in Node.objects.all()])

    @extend_schema(request=NodeInSerializer, responses={201: NodeSerializer, 200: NodeSerializer},
                   summary="Register or replace a node")
    def post(self, request):
        _platform_admin(request)
        node, created = services.node_register(**_node_fields(request.data))
        used = selectors.gpus_used_by_node().get(node.name, 0)
        return Response(node_object(node, used), status=201 if created else 200)


def _node(name: str) -> Node:
    node = Node.objects.filter(name=name).first()
    if node is None:
        raise NotFound("node_not_found", f"Node '{name}' does not exist.")
    return node


class NodeDetailView(APIView):
    @extend_schema(request=inline_serializer("NodePatch", {
        "schedulable": serializers.BooleanField()}), responses=NodeSerializer,
        summary="Cordon (schedulable: false) or uncordon a node; bound work stays")
    def patch(self, request, name: str):
        _platform_admin(request)
        node = _node(name)
        schedulable = request.data.get("schedulable") if isinstance(request.data, dict) else None
        if not isinstance(schedulable, bool):
            raise _invalid("schedulable", "schedulable must be true or false.")
        node = services.node_set_schedulable(node=node, schedulable=schedulable)
        return Response(node_object(node, selectors.gpus_used_by_node().get(node.name, 0)))

    @extend_schema(responses={204: None}, parameters=[OpenApiParameter("force", bool)],
                   summary="Remove a node (409 node_in_use while pods are bound, unless force)")
    def delete(self, request, name: str):
        _platform_admin(request)
        force = request.query_params.get("force", "").lower() in {"1", "true", "yes"}
        services.node_delete(node=_node(name), force=force)
        return Response(status=204)


class TopologyView(APIView):
    @extend_schema(responses=TopologySerializer, summary="The cluster Topology, coarsest first")
    def get(self, request):
        return Response({"name": DEFAULT_TOPOLOGY_NAME, "levels": cluster_topology()})

    @extend_schema(request=TopologySerializer, responses=TopologySerializer,
                   summary="Replace the topology levels (placed work is not moved)")
    def put(self, request):
        _platform_admin(request)
        levels = request.data.get("levels") if isinstance(request.data, dict) else None
        topology = services.topology_replace(levels=levels)
        return Response({"name": topology.name, "levels": topology.levels})


CycleSerializer = inline_serializer("Cycle", {
    "bound": serializers.IntegerField(), "evicted": serializers.IntegerField(),
    "pending": serializers.IntegerField(), "duration_ms": serializers.FloatField()})


class CycleView(APIView):
    @extend_schema(request=None, responses=CycleSerializer, summary="Run one cycle now")
    def post(self, request):
        _platform_admin(request)
        return Response(services.cycle_run().as_dict())


class SchedulerStatusView(APIView):
    @extend_schema(responses=inline_serializer("SchedulerStatus", {
        "last_cycle": serializers.DictField(allow_null=True),
        "queues": serializers.ListField(child=serializers.DictField()),
        "pending": serializers.ListField(child=serializers.DictField())}),
        summary="Last cycle figures, per-queue shares, pending gangs with reasons")
    def get(self, request):
        return Response(selectors.scheduler_status(roles=roles_for(request.user),
                                                   user=request.user))


class ExplainView(APIView):
    @extend_schema(responses=inline_serializer("Explain", {
        "workflow": serializers.CharField(),
        "groups": serializers.ListField(child=serializers.DictField())}),
        summary="Why a workflow is pending: the scheduler's reasons per group")
    def get(self, request, name: str):
        workflow = workflow_get(name=name, roles=roles_for(request.user), user=request.user)
        return Response(selectors.explain(workflow))
