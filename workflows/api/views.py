"""Workflow REST endpoints (API.md "Workflows"): shape and permissions; writes go to services."""

from __future__ import annotations

import yaml
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, status
from rest_framework import serializers as drf_serializers
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.accounts.roles import roles_for
from osmo.errors import Forbidden, OsmoError
from pools import selectors as pool_selectors

from .. import admission, lifecycle, selectors
from ..manifests import manifests_for, stored_spec
from . import serializers as s
from .filters import WorkflowFilter
from .parsers import TextYAMLParser, XYAMLParser, YAMLTextParser


def _flag(request, name: str) -> bool:
    value = request.query_params.get(name, "false").lower()
    if value not in {"true", "false", "1", "0", "yes", "no"}:
        raise OsmoError("invalid_request", f"{name} must be true or false.",
                        errors={name: [f"Not a boolean: '{value}'."]})
    return value in {"true", "1", "yes"}


def _string_list(body: dict, key: str) -> list[str]:
    value = body.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and "=" in v for v in value):
        raise OsmoError("invalid_request", f"{key} must be a list of 'key=value' strings.",
                        errors={key: ["A list of 'key=value' strings."]})
    return value


def _submission(data) -> tuple[str, list[str], list[str]]:
    """(spec text, set_variables, set_string_variables) from a JSON or YAML body."""
    if isinstance(data, str):
        return data, [], []
    if not isinstance(data, dict):
        raise OsmoError("invalid_request", "Send the workflow as JSON {file: ...} or as "
                                           "application/yaml.")
    source = data.get("file")
    if not isinstance(source, str) or not source.strip():
        raise OsmoError("invalid_spec", "The body needs the workflow YAML in 'file'.",
                        errors={"file": ["This field is required."]})
    return (source, _string_list(data, "set_variables"),
            _string_list(data, "set_string_variables"))


class WorkflowSubmitView(APIView):
    parser_classes = [JSONParser, YAMLTextParser, TextYAMLParser, XYAMLParser]

    @extend_schema(
        request={"application/json": s.SubmitSerializer, "application/yaml": str},
        responses={201: s.WorkflowSerializer, 200: s.DryRunSerializer},
        parameters=[OpenApiParameter("priority", str, enum=["HIGH", "NORMAL", "LOW"]),
                    OpenApiParameter("dry_run", bool)],
        summary="Submit a workflow to a pool or subpool (admission against quota)")
    def post(self, request, pool: str):
        roles = roles_for(request.user)
        try:
            source, set_variables, set_string_variables = _submission(request.data)
            dry_run = _flag(request, "dry_run")
        except OsmoError:
            # The pool's 404/403 come first (API.md order); the lookup is only paid here,
            # admission itself looks the pool up and locks it in one statement.
            pool_selectors.pool_get_for_write(name=pool, roles=roles)
            raise
        result = admission.workflow_submit(
            actor=request.user, pool=pool, roles=roles, source=source,
            priority=request.query_params.get("priority"), set_variables=set_variables,
            set_string_variables=set_string_variables, dry_run=dry_run)
        body = s.workflow_object(result.workflow, groups=result.groups, tasks=result.tasks)
        if dry_run:
            manifests = manifests_for(spec=result.spec, workflow_name=result.workflow.name,
                                      pool=result.workflow.pool,
                                      priority=result.workflow.priority)
            return Response({"workflow": body, "manifests": manifests})
        return Response(body, status=status.HTTP_201_CREATED)


class WorkflowListView(generics.ListAPIView):
    filterset_class = WorkflowFilter

    def get_queryset(self):
        return selectors.visible_workflows(roles=roles_for(self.request.user),
                                           user=self.request.user)

    @extend_schema(responses=s.WorkflowSerializer(many=True),
                   summary="Workflows visible to the caller, newest first")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def list(self, request, *args, **kwargs):
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response([s.workflow_object(w) for w in page])


def _workflow(request, name: str):
    return selectors.workflow_get(name=name, roles=roles_for(request.user), user=request.user)


class WorkflowDetailView(APIView):
    @extend_schema(responses=s.WorkflowSerializer, summary="One workflow with groups and tasks")
    def get(self, request, name: str):
        return Response(s.workflow_object(_workflow(request, name)))


class WorkflowCancelView(APIView):
    @extend_schema(request=None, responses=s.WorkflowSerializer,
                   summary="Cancel a workflow: alive tasks end FAILED_CANCELED")
    def post(self, request, name: str):
        workflow = _workflow(request, name)
        roles = roles_for(request.user)
        if not (workflow.user_id == request.user.pk
                or roles.can_admin(workflow.pool.top_level_name)):
            raise Forbidden("Only the submitter or an admin of the pool can cancel it.")
        lifecycle.workflow_cancel(workflow=workflow)
        return Response(s.workflow_object(_workflow(request, name)))


class WorkflowKaiView(APIView):
    @extend_schema(responses=s.DryRunSerializer,
                   summary="The PodGroup and Pod manifests of a workflow's groups")
    def get(self, request, name: str):
        workflow = _workflow(request, name)
        if workflow.manifests is not None:  # a workload: its manifests as grouped
            manifests = workflow.manifests
        else:
            manifests = manifests_for(spec=stored_spec(workflow), workflow_name=workflow.name,
                                      pool=workflow.pool, priority=workflow.priority)
        return Response({"workflow": s.workflow_object(workflow), "manifests": manifests})


class TaskStatusView(APIView):
    @extend_schema(request=s.TaskStatusSerializer, responses=s.WorkflowSerializer,
                   summary="Report a task's status (cluster backends)")
    def post(self, request, name: str, task: str):
        roles = roles_for(request.user)
        if not (roles.backend or roles.platform_admin):
            raise Forbidden("Only cluster backends (osmo-backend) report task status.")
        workflow = _workflow(request, name)
        body = request.data if isinstance(request.data, dict) else {}
        new_status = body.get("status")
        exit_code = body.get("exit_code")
        if not isinstance(new_status, str):
            raise OsmoError("invalid_request", "status is required.",
                            errors={"status": ["This field is required."]})
        if exit_code is not None and (isinstance(exit_code, bool)
                                      or not isinstance(exit_code, int)):
            raise OsmoError("invalid_request", "exit_code must be an integer.",
                            errors={"exit_code": ["Must be an integer."]})
        lifecycle.task_report_status(workflow=workflow, task_name=task, status=new_status,
                                    exit_code=exit_code, node=body.get("node") or None,
                                    reason=body.get("reason") or None)
        return Response(s.workflow_object(_workflow(request, name)))


class WorkloadSubmitView(APIView):
    parser_classes = [JSONParser, YAMLTextParser, TextYAMLParser, XYAMLParser]

    @extend_schema(
        request={"application/json": dict, "application/yaml": str},
        responses={201: inline_serializer("WorkloadAdmitted", {
            "name": drf_serializers.CharField(),
            "podgroups": drf_serializers.ListField(child=drf_serializers.CharField()),
            "pods": drf_serializers.ListField(child=drf_serializers.CharField())})},
        parameters=[OpenApiParameter("priority", str, enum=["HIGH", "NORMAL", "LOW"])],
        summary="Submit a Kubernetes workload; the pod grouper makes its PodGroups and pods")
    def post(self, request, pool: str):
        roles = roles_for(request.user)
        target = pool_selectors.pool_get_for_write(name=pool, roles=roles)
        manifest = request.data
        if isinstance(manifest, str):
            try:
                documents = [d for d in yaml.safe_load_all(manifest) if d is not None]
            except yaml.YAMLError as error:
                raise OsmoError("invalid_spec", f"The workload is not valid YAML: {error}",
                                errors={"body": [str(error)]}) from error
            manifest = documents[0] if len(documents) == 1 else {
                "apiVersion": "v1", "kind": "List", "items": documents}
        if not isinstance(manifest, dict) or not manifest:
            raise OsmoError("invalid_spec", "Send a Kubernetes object or a List of them.",
                            errors={"body": ["An object with apiVersion and kind."]})
        result = admission.workload_submit(actor=request.user, pool=target, manifest=manifest,
                                           priority=request.query_params.get("priority"))
        return Response({"name": result.workflow.name,
                         "podgroups": [g.podgroup for g in result.groups],
                         "pods": [t.name for t in result.tasks]},
                        status=status.HTTP_201_CREATED)
