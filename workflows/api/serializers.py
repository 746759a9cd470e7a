"""Shapes of the workflow API (API.md "Workflows")."""

from __future__ import annotations

from rest_framework import serializers

from pools.api.serializers import _iso

from ..models import Workflow


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


class SubmitSerializer(serializers.Serializer):
    file = serializers.CharField(help_text=(
        "The OSMO workflow spec (v2) as YAML text; templated specs are rendered with their "
        "default-values and the variables below. Scheduling extensions per group: a "
        "`scheduling:` block with minMember, minSubGroup, subGroups [{name, parent, minMember, "
        "minSubGroup, topologyConstraint}] and topologyConstraint {requiredTopologyLevel, "
        "preferredTopologyLevel}; per task: replicas and subGroup (workflows/spec/EXTENSIONS.md)."
    ))
    set_variables = serializers.ListField(child=serializers.CharField(), required=False,
                                          help_text="k=v pairs; values parsed as YAML scalars.")
    set_string_variables = serializers.ListField(child=serializers.CharField(), required=False,
                                                 help_text="k=v pairs; values kept as strings.")


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


class TaskStatusSerializer(serializers.Serializer):
    status = serializers.CharField()
    exit_code = serializers.IntegerField(required=False, allow_null=True)
    node = serializers.CharField(required=False, help_text="Where the task runs (RUNNING).")
    reason = serializers.CharField(required=False)
