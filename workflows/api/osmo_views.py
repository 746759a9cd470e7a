"""The rest of NVIDIA's OSMO client over workflows (docs/API-OSMO-CLIENT.md): `task list`,
`workflow spec`, `workflow restart` and `workflow tag`, in OSMO's shapes."""

from __future__ import annotations

import django_filters
from django.conf import settings
from django.db.models import Count, Sum
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo import keyset
from osmo.accounts.roles import roles_for
from osmo.errors import Conflict, Forbidden, RequestInvalid
from osmo.serializers import QueryBooleanField, RequestSerializer
from osmo.streaming import text_stream
from pools.models import Pool

from .. import admission, lifecycle, selectors
from ..models import FINAL_TASK_STATUSES, Priority, Task, TaskStatus, WorkflowStatus
from .filters import ValuesFilter
from .serializers import client_time, overview_url
from .views import _workflow

# Task statuses OSMO's client may ask for that tasks here never have: they match nothing.
OSMO_ONLY_TASK_STATUSES = ("PROCESSING", "INITIALIZING", "RESCHEDULED", "FAILED_UPSTREAM",
                           "FAILED_SERVER_ERROR", "FAILED_BACKEND_ERROR", "FAILED_EXEC_TIMEOUT",
                           "FAILED_QUEUE_TIMEOUT", "FAILED_IMAGE_PULL", "FAILED_START_ERROR",
                           "FAILED_START_TIMEOUT")
MAX_TASK_PAGE = 1000
GIB = 1024**3


class TaskFilter(django_filters.FilterSet):
    workflow_id = django_filters.CharFilter(field_name="workflow__name")
    statuses = django_filters.MultipleChoiceFilter(
        method="filter_statuses", distinct=False,
        choices=[*TaskStatus.choices, *((s, s) for s in OSMO_ONLY_TASK_STATUSES)])
    users = ValuesFilter(field_name="workflow__user__username")
    pools = ValuesFilter(method="filter_pools")
    nodes = ValuesFilter(field_name="node_name")
    priority = django_filters.MultipleChoiceFilter(choices=Priority.choices, distinct=False)
    started_after = django_filters.IsoDateTimeFilter(field_name="started_at", lookup_expr="gte")
    started_before = django_filters.IsoDateTimeFilter(field_name="started_at",
                                                      lookup_expr="lt")

    class Meta:
        model = Task
        fields: list[str] = []

    def filter_statuses(self, queryset, name, value):
        # Only statuses a task can have: the client's default (PROCESSING, SCHEDULING,
        # INITIALIZING, RUNNING) then names alive ones only, which the alive tasks' partial
        # index serves.
        if not value:
            return queryset
        ours = [status for status in value if status in TaskStatus.values]
        return queryset.filter(status__in=ours) if ours else queryset.none()

    def filter_pools(self, queryset, name, value):
        # The pools' ids as values (no join on their names): a task carries its pool's id.
        if not value:
            return queryset
        return queryset.filter(pool_id__in=Pool.objects.filter(name__in=value).values("pk"))


class TaskListQuerySerializer(RequestSerializer):
    limit = serializers.IntegerField(required=False, default=20, min_value=1,
                                     max_value=MAX_TASK_PAGE)
    offset = serializers.IntegerField(required=False, default=0, min_value=0,
                                      max_value=10_000_000)
    order = serializers.ChoiceField(choices=["ASC", "DESC"], required=False, default="ASC")
    summary = QueryBooleanField(required=False, default=False)
    aggregate_by_workflow = QueryBooleanField(required=False, default=False)
    all_users = QueryBooleanField(required=False, default=False)
    all_pools = QueryBooleanField(required=False, default=False)
    cursor = serializers.CharField(
        required=False, max_length=keyset.MAX_CURSOR_CHARS,
        help_text="`next_cursor` of the page before (opaque; not with `offset`).")

    def validate(self, attrs):
        if "cursor" in attrs:
            if "offset" in self.initial_data:
                raise keyset.refused("Give `cursor` or `offset`, not both.")
            position = keyset.decode(attrs["cursor"], descending=attrs["order"] == "DESC")
            if not position.forward:
                raise keyset.refused("Not a cursor this list gave.")
            attrs["position"] = position
        return attrs


def _figures(row: dict) -> dict:
    return {"storage": 0, "cpu": round((row["cpu"] or 0) / 1000),
            "memory": round((row["memory"] or 0) / GIB, 2), "gpu": row["gpu"] or 0}


def _task_entry(task: Task, request) -> dict:
    base = request.build_absolute_uri(f"/api/workflow/{task.workflow.name}")
    failed = task.status in FINAL_TASK_STATUSES and task.status != TaskStatus.COMPLETED
    return {"user": task.workflow.user.get_username() if task.workflow.user else None,
            "workflow_id": task.workflow.name, "workflow_uuid": str(task.workflow_id),
            "task_name": task.name, "retry_id": task.retry_id, "pool": task.pool.name,
            "node": task.node_name or None, "start_time": client_time(task.started_at),
            "end_time": client_time(task.finished_at), "status": task.status,
            "overview": overview_url(task.workflow.name, request),
            "logs": f"{base}/logs?task_name={task.name}",
            "error_logs": f"{base}/error_logs?task_name={task.name}" if failed else None,
            **_figures({"cpu": task.cpu_millis, "memory": task.memory_bytes,
                        "gpu": task.gpus}),
            "priority": task.priority}


class TaskListView(APIView):
    """`osmo task list`: tasks of the workflows the caller can see (as `GET /api/workflow`,
    every visible one unless `users` narrows it), or their sums."""

    @extend_schema(parameters=[TaskListQuerySerializer], responses=dict,
                   summary="Tasks of visible workflows (the OSMO client's `task list`)")
    def get(self, request):
        query = TaskListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        options = query.validated_data
        tasks = TaskFilter(request.query_params, queryset=selectors.visible_tasks(
            roles=roles_for(request.user), user=request.user))
        if not tasks.is_valid():
            raise RequestInvalid(tasks.errors)
        tasks = tasks.qs
        sums = {"cpu": Sum("cpu_millis"), "memory": Sum("memory_bytes"), "gpu": Sum("gpus")}
        if options["summary"] or options["aggregate_by_workflow"]:
            keys = ["workflow__user__username", "pool__name", "priority"]
            if options["aggregate_by_workflow"]:
                keys.insert(1, "workflow__name")
            rows = (tasks.values(*keys).annotate(tasks=Count("id"), **sums)
                    .order_by(*keys)[:MAX_TASK_PAGE])
            return Response({"summaries": [{
                "user": row["workflow__user__username"], "pool": row["pool__name"],
                "priority": row["priority"],
                **({"workflow_id": row["workflow__name"]}
                   if options["aggregate_by_workflow"] else {}),
                **_figures(row)} for row in rows]})
        page, next_cursor = selectors.task_page(
            tasks, descending=options["order"] == "DESC", limit=options["limit"],
            offset=options["offset"], position=options.get("position"))
        return Response({"tasks": [_task_entry(task, request) for task in page],
                         "next_cursor": next_cursor})


class WorkflowSpecQuerySerializer(RequestSerializer):
    use_template = QueryBooleanField(required=False, default=False,
                                     help_text="The spec as submitted (before templates).")


class WorkflowSpecView(APIView):
    @extend_schema(parameters=[WorkflowSpecQuerySerializer],
                   responses={(200, "text/plain"): str},
                   summary="The workflow's spec: rendered, or as submitted")
    def get(self, request, name: str):
        workflow = _workflow(request, name)
        query = WorkflowSpecQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        text = workflow.spec if query.validated_data["use_template"] else (
            workflow.rendered_spec or workflow.spec)
        return text_stream(request, iter([text.encode()]), long=False)


class WorkflowRestartView(APIView):
    """`osmo workflow restart`: a failed workflow's rendered spec submitted again (admission
    and quota as for any submission) to the pool named in the path, with its priority and
    labels. The whole workflow runs again: OSMO keeps the outputs of groups that completed,
    and this service keeps no outputs."""

    @extend_schema(request=None, responses={200: dict},
                   summary="Submit a failed workflow again")
    def post(self, request, pool: str, name: str):
        workflow = _workflow(request, name)
        if workflow.status not in (WorkflowStatus.FAILED, WorkflowStatus.FAILED_CANCELED,
                                   WorkflowStatus.FAILED_PREEMPTED,
                                   WorkflowStatus.FAILED_EVICTED,
                                   WorkflowStatus.FAILED_BACKEND_ERROR):
            raise Conflict("invalid_transition", f"Restart can only be used on FAILED "
                           f"workflows: workflow {workflow.name} has status {workflow.status}.")
        if workflow.manifests is not None:
            raise Conflict("invalid_transition", "A workload is restarted by submitting its "
                           "manifests again.")
        result = admission.workflow_submit(
            actor=request.user, pool=pool, roles=roles_for(request.user),
            source=workflow.rendered_spec or workflow.spec, priority=workflow.priority,
            labels=dict(workflow.labels or {}))
        new = result.workflow
        return Response({"name": new.name, "overview": overview_url(new.name, request),
                         "logs": request.build_absolute_uri(f"/api/workflow/{new.name}/logs"),
                         "dashboard_url": None, "warnings": []})


class TagQuerySerializer(RequestSerializer):
    add = serializers.ListField(child=serializers.CharField(max_length=63), required=False,
                                default=list, max_length=32)
    remove = serializers.ListField(child=serializers.CharField(max_length=63), required=False,
                                   default=list, max_length=32)


class WorkflowTagView(APIView):
    @extend_schema(request=None, parameters=[TagQuerySerializer], responses=dict,
                   summary="Add and remove a workflow's tags (from OSMO_WORKFLOW_TAGS)")
    def post(self, request, name: str):
        workflow = _workflow(request, name)
        query = TagQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        add, remove = query.validated_data["add"], query.validated_data["remove"]
        if not add and not remove:
            raise RequestInvalid({"add": ["No tags specified!"]})
        unknown = sorted(set(add) - set(settings.OSMO_WORKFLOW_TAGS))
        if unknown:
            raise RequestInvalid({"add": [f"Not a tag an admin has set: {', '.join(unknown)}."]})
        if not selectors.can_cancel(workflow=workflow, roles=roles_for(request.user),
                                    user=request.user):
            raise Forbidden("Only the submitter or an admin of the pool can tag it.")
        tags = lifecycle.workflow_tag(workflow=workflow, add=add, remove=remove)
        return Response({"name": workflow.name, "tags": tags})


class TagListView(APIView):
    @extend_schema(responses=dict, summary="The tags workflows may carry (OSMO_WORKFLOW_TAGS)")
    def get(self, request):
        return Response({"tags": list(settings.OSMO_WORKFLOW_TAGS)})
