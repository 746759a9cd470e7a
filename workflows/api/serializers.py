"""Shapes of the workflow API (API.md "Workflows")."""

from __future__ import annotations

import datetime as dt
import functools
import re

from django.conf import settings
from django.urls import get_script_prefix, reverse
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from osmo.pagination import COUNT_BOUND
from osmo.serializers import (
    INT32_MAX,
    QueryBooleanField,
    RequestSerializer,
    StrictCharField,
    StrictIntegerField,
    UpperChoiceField,
)
from pools.api.serializers import _iso

from .. import selectors
from ..models import Priority, Workflow


def client_time(value) -> str | None:
    """A timestamp as the OSMO client parses it: naive UTC ISO 8601
    (`2026-11-23T23:19:40.858691`)."""
    if value is None:
        return None
    return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat()


# A name of these characters is its own URL-quoted form and matches the page's <str:name>.
PLAIN_NAME = re.compile(r"[A-Za-z0-9._~-]+")
NAME_MARK = "0osmo-workflow-name0"


@functools.lru_cache(maxsize=16)
def _workflow_page(script_prefix: str) -> tuple[str, str]:
    """The dashboard's workflow page path around its name, for this script prefix (reverse()
    depends on it): 2 µs a link instead of reverse()'s 15."""
    head, _, tail = reverse("dashboard:workflow", args=[NAME_MARK]).partition(NAME_MARK)
    return head, tail


def overview_url(name: str, request=None) -> str:
    """The workflow's page in the dashboard: absolute under OSMO_DASHBOARD_URL, else under the
    address the request came to, else a path."""
    if PLAIN_NAME.fullmatch(name):
        head, tail = _workflow_page(get_script_prefix())
        path = head + name + tail
    else:
        path = reverse("dashboard:workflow", args=[name])
    if settings.OSMO_DASHBOARD_URL:
        return settings.OSMO_DASHBOARD_URL + path
    return request.build_absolute_uri(path) if request is not None else path


def task_object(task) -> dict:
    return {"name": task.name, "status": task.status, "reason": task.reason, "gpus": task.gpus,
            "node": task.node_name or None, "exit_code": task.exit_code,
            # as the OSMO client reads a task: the run of its group (exit actions' reschedules)
            "retry_id": task.retry_id, "start_time": client_time(task.started_at),
            "end_time": client_time(task.finished_at)}


def group_object(group) -> dict:
    return {"name": group.name, "status": group.status, "reason": group.reason,
            "podgroup": group.podgroup, "depends_on": list(group.depends_on),
            "gpus": group.gpus, "backend": group.backend, "retry_id": group.retry_id,
            "tasks": [task_object(t) for t in group.tasks.all()]}


def workflow_object(workflow: Workflow, *, groups=None, tasks=None, request=None,
                    waiting: dict | None = None) -> dict:
    """The Workflow object; `groups`/`tasks` pass unsaved rows (a dry run). It also carries
    the fields the OSMO client reads (docs/API-OSMO-CLIENT.md); `request` makes `overview`
    absolute. `waiting`: the page's `selectors.pending_reasons` (read here for one workflow),
    so a list and the detail give a waiting workflow the same `reason`."""
    if groups is None:
        group_bodies = [group_object(g) for g in workflow.groups.all()]
    else:
        group_bodies = [{
            "name": g.name, "status": g.status, "reason": g.reason, "podgroup": g.podgroup,
            "depends_on": list(g.depends_on), "gpus": g.gpus, "backend": g.backend,
            "retry_id": g.retry_id,
            "tasks": [task_object(t) for t in tasks if t.group is g]} for g in groups]
    if waiting is None and groups is None:
        waiting = selectors.pending_reasons([workflow])
    pending = (waiting or {}).get(workflow.name)
    return {
        "name": workflow.name,
        "kind": workflow.kind,
        "pool": workflow.pool.name,
        "priority": workflow.priority,
        "user": workflow.user.get_username() if workflow.user else None,
        "status": workflow.status,
        "reason": workflow.reason or (pending and pending["code"]),
        "pending_reason": pending,
        "gpus_requested": workflow.gpus_requested,
        "exec_timeout_seconds": workflow.exec_timeout_seconds,
        "queue_timeout_seconds": workflow.queue_timeout_seconds,
        "submitted_at": _iso(workflow.submitted_at),
        "started_at": _iso(workflow.started_at),
        "finished_at": _iso(workflow.finished_at),
        "groups": group_bodies,
        "labels": dict(workflow.labels or {}),
        "tags": list(workflow.tags or []),
        "submitted_by": workflow.user.get_username() if workflow.user else None,
        "submit_time": client_time(workflow.submitted_at),
        "start_time": client_time(workflow.started_at),
        "end_time": client_time(workflow.finished_at),
        "overview": overview_url(workflow.name, request),
        "app": ({"uuid": str(workflow.app_uuid), "name": workflow.app_name,
                 "version": workflow.app_version} if workflow.app_name else None),
    }


def list_entry(workflow: Workflow, request=None) -> dict:
    """A row of the OSMO client's `workflow list`."""
    return {"user": workflow.user.get_username() if workflow.user else None,
            "name": workflow.name, "submit_time": client_time(workflow.submitted_at),
            "status": workflow.status, "priority": workflow.priority,
            "labels": dict(workflow.labels or {}), "overview": overview_url(workflow.name, request),
            "pool": workflow.pool.name}


def _key_value(item: str) -> None:
    if "=" not in item:
        raise serializers.ValidationError("Must be a 'key=value' string.")


def _variables(help_text: str) -> serializers.ListField:
    return serializers.ListField(child=StrictCharField(validators=[_key_value]), default=list,
                                 allow_null=True, help_text=help_text)


class SubmitSerializer(RequestSerializer):
    """JSON body of `POST /api/pool/{pool}/workflow` (a YAML body is the spec itself)."""

    field_error_codes = {"file": "invalid_spec"}

    file = StrictCharField(help_text=(
        "The OSMO workflow spec (v2) as YAML text; templated specs are rendered with their "
        "default-values and the variables below. Scheduling extensions per group: a "
        "`scheduling:` block with minMember, minSubGroup, subGroups [{name, parent, minMember, "
        "minSubGroup, topologyConstraint}] and topologyConstraint {requiredTopologyLevel, "
        "preferredTopologyLevel}; per task: replicas and subGroup (workflows/spec/EXTENSIONS.md)."
    ))
    set_variables = _variables("k=v pairs; values parsed as YAML scalars.")
    set_string_variables = _variables("k=v pairs; values kept as strings.")

    def validate_file(self, source: str) -> str:
        if not source.strip():
            raise serializers.ValidationError("This field may not be blank.")
        return source

    def validate_set_variables(self, items: list[str] | None) -> list[str]:
        return items or []

    def validate_set_string_variables(self, items: list[str] | None) -> list[str]:
        return items or []


# Kubernetes label syntax, as the OSMO client checks labels: an optional DNS prefix and a name
# of up to 63 characters, alphanumeric at both ends.
_LABEL_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_DNS_PREFIX = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)*"
LABEL_KEY = re.compile(rf"(?:{_DNS_PREFIX}/)?{_LABEL_NAME}")
LABEL_VALUE = re.compile(_LABEL_NAME)
MAX_LABELS = 16


def _label(item: str) -> None:
    key, sep, value = item.partition("=")
    if not sep or not LABEL_KEY.fullmatch(key) or not LABEL_VALUE.fullmatch(value):
        raise serializers.ValidationError(
            f"'{item}' is not KEY=VALUE with a Kubernetes label key and value.")


def labels_from(items: list[str]) -> dict[str, str]:
    return dict(item.partition("=")[::2] for item in items)


class SubmitQuerySerializer(RequestSerializer):
    priority = UpperChoiceField(choices=Priority.choices, required=False, allow_blank=True,
                                help_text="Default NORMAL.")
    label = serializers.ListField(
        child=StrictCharField(validators=[_label]), required=False, default=list,
        max_length=MAX_LABELS,
        help_text="KEY=VALUE workflow labels (repeat the parameter); they override the spec's "
                  "`labels`.")
    dry_run = QueryBooleanField(required=False, default=False,
                                help_text="Run every check, write nothing; 200 with the "
                                          "would-be workflow and its manifests.")
    validation_only = QueryBooleanField(
        required=False, default=False,
        help_text="As dry_run, and the body also carries `logs` (the OSMO client's "
                  "`workflow validate`).")
    app_uuid = StrictCharField(required=False, max_length=36,
                               help_text="The app this spec comes from (`osmo app submit`).")
    app_version = serializers.IntegerField(required=False, min_value=1, max_value=INT32_MAX,
                                           help_text="The app's version (default: newest).")


class WorkloadQuerySerializer(RequestSerializer):
    priority = UpperChoiceField(choices=Priority.choices, required=False, allow_blank=True,
                                help_text="Default: from the PodGroup's priority class.")


class TaskSerializer(serializers.Serializer):
    name = serializers.CharField()
    status = serializers.CharField()
    reason = serializers.CharField(allow_null=True)
    gpus = serializers.IntegerField()
    node = serializers.CharField(allow_null=True)
    exit_code = serializers.IntegerField(allow_null=True)
    retry_id = serializers.IntegerField(help_text="0, then one more each time an exit action "
                                                  "reschedules its group.")
    start_time = serializers.CharField(allow_null=True, help_text="Naive UTC ISO 8601.")
    end_time = serializers.CharField(allow_null=True, help_text="Naive UTC ISO 8601.")


class GroupSerializer(serializers.Serializer):
    name = serializers.CharField()
    status = serializers.CharField()
    reason = serializers.CharField(allow_null=True)
    podgroup = serializers.CharField()
    depends_on = serializers.ListField(child=serializers.CharField())
    gpus = serializers.IntegerField()
    backend = serializers.CharField(allow_null=True,
                                    help_text="Where the group was dispatched (null until then).")
    retry_id = serializers.IntegerField(help_text="Reschedules by exit actions so far.")
    tasks = TaskSerializer(many=True)


class PendingReasonSerializer(serializers.Serializer):
    group = serializers.CharField()
    code = serializers.CharField()
    message = serializers.CharField()


class WorkflowSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=["workflow", "workload"])
    pool = serializers.CharField()
    priority = serializers.ChoiceField(choices=["HIGH", "NORMAL", "LOW"])
    user = serializers.CharField(allow_null=True)
    status = serializers.CharField()
    reason = serializers.CharField(
        allow_null=True, help_text="A snake_case code: why it ended, or the scheduler's first "
                                   "reason while a group waits (`pending_reason`).")
    pending_reason = PendingReasonSerializer(
        allow_null=True, help_text="While a group waits: the scheduler's first reason, as "
                                   "`explain` gives it; null otherwise.")
    gpus_requested = serializers.IntegerField()
    exec_timeout_seconds = serializers.IntegerField(
        allow_null=True, help_text="Each group's exec_timeout (from its RUNNING transition); "
                                   "null: none.")
    queue_timeout_seconds = serializers.IntegerField(
        allow_null=True, help_text="Each group's queue_timeout (from its SCHEDULING "
                                   "transition); null: none.")
    submitted_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    groups = GroupSerializer(many=True)
    labels = serializers.DictField(child=serializers.CharField())
    tags = serializers.ListField(child=serializers.CharField(),
                                 help_text="Tags from the admins' list (`osmo workflow tag`).")
    submitted_by = serializers.CharField(allow_null=True, help_text="Same as `user`.")
    submit_time = serializers.CharField(help_text="Naive UTC ISO 8601, as the OSMO client "
                                                  "parses it (`2026-11-23T23:19:40.858691`).")
    start_time = serializers.CharField(allow_null=True, help_text="Naive UTC ISO 8601.")
    end_time = serializers.CharField(allow_null=True, help_text="Naive UTC ISO 8601.")
    overview = serializers.CharField(help_text="The workflow's page in the dashboard.")
    app = serializers.DictField(allow_null=True,
                                help_text="{uuid, name, version} of the app it was submitted "
                                          "from (`osmo app submit`), else null.")


class SubmittedSerializer(WorkflowSerializer):
    warnings = serializers.ListField(child=serializers.CharField())


class DryRunSerializer(serializers.Serializer):
    workflow = WorkflowSerializer()
    manifests = serializers.ListField(child=serializers.DictField())


class SubmitDryRunSerializer(DryRunSerializer):
    name = serializers.CharField(help_text="The name the workflow would get.")
    spec = serializers.CharField(help_text="The rendered spec (templates expanded), as YAML.")
    warnings = serializers.ListField(child=serializers.CharField())
    logs = serializers.CharField(required=False, help_text="With validation_only: a summary.")


class ListEntrySerializer(serializers.Serializer):
    user = serializers.CharField(allow_null=True)
    name = serializers.CharField()
    submit_time = serializers.CharField(help_text="Naive UTC ISO 8601.")
    status = serializers.CharField()
    priority = serializers.CharField()
    labels = serializers.DictField(child=serializers.CharField())
    overview = serializers.CharField()
    pool = serializers.CharField()


@extend_schema_serializer(many=False)  # already the page: not to be wrapped in another one
class WorkflowPageSerializer(serializers.Serializer):
    count = serializers.IntegerField(
        help_text=f"Exact up to {COUNT_BOUND:,} workflows; above, an estimate "
                  "(`count_is_estimate`).")
    count_is_estimate = serializers.BooleanField(
        help_text="`count` is the database's estimate, not an exact count.")
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
    results = WorkflowSerializer(many=True)
    workflows = ListEntrySerializer(many=True, help_text="The page as the OSMO client reads it.")
    more_entries = serializers.BooleanField(help_text="Whether a next page exists.")


class TaskStatusSerializer(RequestSerializer):
    # Not a choice: an unknown status is a 409 invalid_transition (API.md), from the service.
    status = StrictCharField(help_text="RUNNING, COMPLETED, FAILED, FAILED_PREEMPTED, ...: "
                                       "forward moves only, else 409 invalid_transition.")
    exit_code = StrictIntegerField(required=False, allow_null=True)
    node = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=253,
                           help_text="Where the task runs (RUNNING).")
    reason = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=60)
