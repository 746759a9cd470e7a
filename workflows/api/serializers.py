"""Shapes of the workflow API (API.md "Workflows")."""

from __future__ import annotations

from rest_framework import serializers

from osmo.serializers import (
    QueryBooleanField,
    RequestSerializer,
    StrictCharField,
    StrictIntegerField,
    UpperChoiceField,
)
from pools.api.serializers import _iso

from ..models import Priority, Workflow


def task_object(task) -> dict:
    return {"name": task.name, "status": task.status, "reason": task.reason, "gpus": task.gpus,
            "node": task.node_name or None, "exit_code": task.exit_code}


def group_object(group) -> dict:
    return {"name": group.name, "status": group.status, "reason": group.reason,
            "podgroup": group.podgroup, "depends_on": list(group.depends_on),
            "gpus": group.gpus, "tasks": [task_object(t) for t in group.tasks.all()]}


def workflow_object(workflow: Workflow, *, groups=None, tasks=None) -> dict:
    """The Workflow object; `groups`/`tasks` pass unsaved rows (a dry run)."""
    if groups is None:
        group_bodies = [group_object(g) for g in workflow.groups.all()]
    else:
        group_bodies = [{
            "name": g.name, "status": g.status, "reason": g.reason, "podgroup": g.podgroup,
            "depends_on": list(g.depends_on), "gpus": g.gpus,
            "tasks": [task_object(t) for t in tasks if t.group is g]} for g in groups]
    return {
        "name": workflow.name,
        "kind": workflow.kind,
        "pool": workflow.pool.name,
        "priority": workflow.priority,
        "user": workflow.user.get_username() if workflow.user else None,
        "status": workflow.status,
        "reason": workflow.reason,
        "gpus_requested": workflow.gpus_requested,
        "submitted_at": _iso(workflow.submitted_at),
        "started_at": _iso(workflow.started_at),
        "finished_at": _iso(workflow.finished_at),
        "groups": group_bodies,
    }


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


class SubmitQuerySerializer(RequestSerializer):
    priority = UpperChoiceField(choices=Priority.choices, required=False, allow_blank=True,
                                help_text="Default NORMAL.")
    dry_run = QueryBooleanField(required=False, default=False,
                                help_text="Run every check, write nothing; 200 with the "
                                          "would-be workflow and its manifests.")


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


class GroupSerializer(serializers.Serializer):
    name = serializers.CharField()
    status = serializers.CharField()
    reason = serializers.CharField(allow_null=True)
    podgroup = serializers.CharField()
    depends_on = serializers.ListField(child=serializers.CharField())
    gpus = serializers.IntegerField()
    tasks = TaskSerializer(many=True)


class WorkflowSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=["workflow", "workload"])
    pool = serializers.CharField()
    priority = serializers.ChoiceField(choices=["HIGH", "NORMAL", "LOW"])
    user = serializers.CharField(allow_null=True)
    status = serializers.CharField()
    reason = serializers.CharField(allow_null=True)
    gpus_requested = serializers.IntegerField()
    submitted_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    groups = GroupSerializer(many=True)


class DryRunSerializer(serializers.Serializer):
    workflow = WorkflowSerializer()
    manifests = serializers.ListField(child=serializers.DictField())


class TaskStatusSerializer(RequestSerializer):
    # Not a choice: an unknown status is a 409 invalid_transition (API.md), from the service.
    status = StrictCharField(help_text="RUNNING, COMPLETED, FAILED, FAILED_PREEMPTED, ...: "
                                       "forward moves only, else 409 invalid_transition.")
    exit_code = StrictIntegerField(required=False, allow_null=True)
    node = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=253,
                           help_text="Where the task runs (RUNNING).")
    reason = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=60)
