"""Workflow REST endpoints (API.md "Workflows"): shape and permissions; writes go to services."""

from __future__ import annotations

import yaml
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import generics, status
from rest_framework import serializers as drf_serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.accounts.roles import roles_for
from osmo.errors import Forbidden, OsmoError, RequestInvalid
from osmo.limits import input_limits
from osmo.pagination import KeysetCountPagination
from osmo.parsers import BoundedJSONParser
from pools import selectors as pool_selectors

from .. import admission, lifecycle, ports, selectors
from ..spec.limits import LimitExceeded, load_yaml_all
from . import serializers as s
from .filters import WorkflowFilter
from .parsers import TextYAMLParser, XYAMLParser, YAMLTextParser


def _submission(request) -> tuple[str, list[str], list[str]]:
    """(spec text, set_variables, set_string_variables) from a YAML or a JSON body."""
    if isinstance(request.data, str):  # the YAML itself (a template may not parse until rendered)
        return request.data, [], []
    body = s.SubmitSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    return (body.validated_data["file"], body.validated_data["set_variables"],
            body.validated_data["set_string_variables"])


class WorkflowSubmitView(APIView):
    parser_classes = [BoundedJSONParser, YAMLTextParser, TextYAMLParser, XYAMLParser]

    @extend_schema(
        request={"application/json": s.SubmitSerializer, "application/yaml": str},
        responses={201: s.SubmittedSerializer, 200: s.SubmitDryRunSerializer},
        parameters=[s.SubmitQuerySerializer],
        summary="Submit a workflow to a pool or subpool (admission against quota)")
    def post(self, request, pool: str):
        roles = roles_for(request.user)
        try:
            source, set_variables, set_string_variables = _submission(request)
            query = s.SubmitQuerySerializer.validated_query(request.query_params)
        except RequestInvalid:
            # The pool's 404/403 come first (API.md order); the lookup is only paid here,
            # admission itself looks the pool up and locks it in one statement.
            pool_selectors.pool_get_for_write(name=pool, roles=roles)
            raise
        validation_only = query["validation_only"]
        dry_run = query["dry_run"] or validation_only
        result = admission.workflow_submit(
            actor=request.user, pool=pool, roles=roles, source=source,
            priority=query.get("priority"), set_variables=set_variables,
            set_string_variables=set_string_variables, dry_run=dry_run,
            labels=s.labels_from(query["label"]),
            app=(ports.apps().app_version(app_uuid=query["app_uuid"],
                                          version=query.get("app_version"))
                 if query.get("app_uuid") else None))
        body = s.workflow_object(result.workflow, groups=result.groups, tasks=result.tasks,
                                 request=request)
        if dry_run:
            manifests = ports.scheduling().workflow_manifests(
                spec=result.spec, workflow_name=result.workflow.name, pool=result.workflow.pool,
                priority=result.workflow.priority)
            # `name` and `spec` (the rendered YAML) are what the OSMO client reads back.
            dry = {"workflow": body, "manifests": manifests, "name": result.workflow.name,
                   "spec": result.workflow.rendered_spec or result.workflow.spec,
                   "warnings": []}
            if validation_only:
                dry["logs"] = (f"Workflow {result.workflow.name} is valid and would be "
                               f"admitted to pool {result.workflow.pool.name} at "
                               f"{result.workflow.priority} priority "
                               f"({result.workflow.gpus_requested} GPUs).")
            return Response(dry)
        return Response({**body, "warnings": []}, status=status.HTTP_201_CREATED)


class WorkflowListView(generics.ListAPIView):
    filterset_class = WorkflowFilter
    pagination_class = KeysetCountPagination  # years of history: no full count, no deep OFFSET

    def get_queryset(self):
        return selectors.visible_workflows(roles=roles_for(self.request.user),
                                           user=self.request.user)

    @extend_schema(responses=s.WorkflowPageSerializer,
                   summary="Workflows visible to the caller, newest first")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def list(self, request, *args, **kwargs):
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        waiting = selectors.pending_reasons(page)
        response = self.get_paginated_response(
            [s.workflow_object(w, request=request, waiting=waiting) for w in page])
        # The OSMO client's reading of the same page.
        response.data["workflows"] = [s.list_entry(w, request) for w in page]
        response.data["more_entries"] = response.data["next"] is not None
        return response


def _workflow(request, name: str):
    return selectors.workflow_get(name=name, roles=roles_for(request.user), user=request.user)


class WorkflowDetailView(APIView):
    @extend_schema(responses=s.WorkflowSerializer, summary="One workflow with groups and tasks")
    def get(self, request, name: str):
        return Response(s.workflow_object(_workflow(request, name), request=request))


class WorkflowCancelView(APIView):
    @extend_schema(request=None, responses=s.WorkflowSerializer,
                   summary="Cancel a workflow: alive tasks end FAILED_CANCELED")
    def post(self, request, name: str):
        workflow = _workflow(request, name)
        roles = roles_for(request.user)
        if not selectors.can_cancel(workflow=workflow, roles=roles, user=request.user):
            raise Forbidden("Only the submitter or an admin of the pool can cancel it.")
        lifecycle.workflow_cancel(workflow=workflow, by=request.user.get_username())
        return Response(s.workflow_object(_workflow(request, name), request=request))


class TaskStatusView(APIView):
    @extend_schema(request=s.TaskStatusSerializer, responses=s.WorkflowSerializer,
                   summary="Report a task's status (cluster backends)")
    def post(self, request, name: str, task: str):
        roles = roles_for(request.user)
        if not (roles.backend or roles.platform_admin):
            raise Forbidden("Only cluster backends (osmo-backend) report task status.")
        workflow = _workflow(request, name)
        body = s.TaskStatusSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        report = body.validated_data
        lifecycle.task_report_status(workflow=workflow, task_name=task, status=report["status"],
                                     exit_code=report.get("exit_code"),
                                    node=report.get("node") or None,
                                    reason=report.get("reason") or None)
        return Response(s.workflow_object(_workflow(request, name), request=request))


class WorkloadSubmitView(APIView):
    parser_classes = [BoundedJSONParser, YAMLTextParser, TextYAMLParser, XYAMLParser]

    @extend_schema(
        request={"application/json": dict, "application/yaml": str},
        responses={201: inline_serializer("WorkloadAdmitted", {
            "name": drf_serializers.CharField(),
            "podgroups": drf_serializers.ListField(child=drf_serializers.CharField()),
            "pods": drf_serializers.ListField(child=drf_serializers.CharField())})},
        parameters=[s.WorkloadQuerySerializer],
        summary="Submit a Kubernetes workload; the pod grouper makes its PodGroups and pods")
    def post(self, request, pool: str):
        roles = roles_for(request.user)
        target = pool_selectors.pool_get_for_write(name=pool, roles=roles)
        manifest = request.data
        if isinstance(manifest, str):
            try:
                documents = load_yaml_all(manifest, input_limits(), path="body")
            except LimitExceeded as error:
                raise OsmoError(error.code, str(error), errors=error.errors) from error
            except yaml.YAMLError as error:
                raise OsmoError("invalid_spec", f"The workload is not valid YAML: {error}",
                                errors={"body": [str(error)]}) from error
            manifest = documents[0] if len(documents) == 1 else {
                "apiVersion": "v1", "kind": "List", "items": documents}
        if not isinstance(manifest, dict) or not manifest:
            raise OsmoError("invalid_spec", "Send a Kubernetes object or a List of them.",
                            errors={"body": ["An object with apiVersion and kind."]})
        query = s.WorkloadQuerySerializer.validated_query(request.query_params)
        result = admission.workload_submit(actor=request.user, pool=target, manifest=manifest,
                                           priority=query.get("priority"))
        return Response({"name": result.workflow.name,
                         "podgroups": [g.podgroup for g in result.groups],
                         "pods": [t.name for t in result.tasks]},
                        status=status.HTTP_201_CREATED)
