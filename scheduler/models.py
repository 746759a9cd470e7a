"""The embedded cluster (nodes, topology) and the scheduler's last cycle.

Pods are the workflow tasks themselves: a task bound to a node holds its GPUs (`Task.node_name`),
so bindings and usage are one table and can never disagree.
"""

from django.db import models
from django.db.models import Q

from scheduler.core import kai_names

DEFAULT_TOPOLOGY_LEVELS = [{"alias": alias, "nodeLabel": label}
                           for alias, label in kai_names.DEFAULT_TOPOLOGY_LEVELS]


class Node(models.Model):
    name = models.CharField(max_length=253, unique=True)
    gpus = models.IntegerField()
    cpu_millis = models.BigIntegerField(default=0, help_text="CPU in millicores.")
    memory_bytes = models.BigIntegerField(default=0)
    labels = models.JSONField(default=dict, blank=True)
    schedulable = models.BooleanField(default=True, help_text="False: cordoned.")
    # A name, not a foreign key: the node mirror and the tests write nodes without the row.
    backend = models.CharField(max_length=63, default=kai_names.DEFAULT_BACKEND, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(gpus__gte=0, cpu_millis__gte=0,
                                               memory_bytes__gte=0),
                                   name="node_capacity_non_negative",
                                   violation_error_message="Capacities cannot be negative."),
        ]

    def __str__(self) -> str:
        return self.name


class ClusterTopology(models.Model):
    """The cluster's Topology (one row): levels coarsest first, as KAI's `Topology`."""

    name = models.CharField(max_length=63, unique=True, default=kai_names.DEFAULT_TOPOLOGY_NAME)
    levels = models.JSONField()
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.name


class SchedulerCycle(models.Model):
    """The last scheduling cycle's figures (one row, replaced every cycle)."""

    at = models.DateTimeField()
    duration_ms = models.FloatField()
    bound = models.IntegerField()
    evicted = models.IntegerField()
    pending = models.IntegerField()
    queues = models.JSONField(default=list)
    pending_gangs = models.JSONField(default=list,
                                     help_text="[{podgroup, workflow, group, reasons}]")
    metrics = models.JSONField(default=dict, blank=True,
                               help_text="OSMO_PLACEMENT=osmo: the cycle's timings and API calls")

    def __str__(self) -> str:
        return f"cycle at {self.at}"


class GroupDispatch(models.Model):
    """Kubernetes backend: one workflow group's objects on the cluster (PodGroup, pods, headless
    Service, file Secrets). The row is written BEFORE the first create call, so a crash between
    create and record leaves an intent that the next pass repeats (creates are idempotent) and
    that cleanup can always find. One row per group (unique), whatever the retries."""

    group = models.ForeignKey("workflows.WorkflowGroup", on_delete=models.CASCADE,
                              related_name="dispatches")
    namespace = models.CharField(max_length=63)
    created_at = models.DateTimeField(auto_now_add=True)
    applied_at = models.DateTimeField(null=True, blank=True,
                                      help_text="Every object of the group exists.")
    cleaned_at = models.DateTimeField(null=True, blank=True,
                                      help_text="The group ended and its objects are deleted.")
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    reasons = models.JSONField(default=list, blank=True,
                               help_text="KAI's latest unschedulable reasons [{code, message}].")

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(fields=["group"], name="group_dispatch_unique_group",
                                    violation_error_message="A group is dispatched once."),
        ]
        # In the cleaner's order: it walked every row ever dispatched by the primary key.
        indexes = [models.Index(fields=["id"], name="group_dispatch_not_cleaned",
                                condition=Q(cleaned_at__isnull=True))]

    def __str__(self) -> str:
        return f"dispatch of group {self.group_id}"


class ClusterBackendStatus(models.Model):
    """Kubernetes backend: the leader's last contact with the API server (one row), read by
    `GET /api/health`."""

    ok = models.BooleanField(default=False)
    checked_at = models.DateTimeField()
    detail = models.TextField(blank=True, default="")
    leader = models.CharField(max_length=253, blank=True, default="")
    placement_missing = models.JSONField(
        default=list, blank=True,
        help_text="What KAI placement lacks on the cluster: [{requirement, detail}].")

    def __str__(self) -> str:
        return f"cluster {'ok' if self.ok else 'down'} at {self.checked_at}"


class BackendKind(models.TextChoices):
    EMBEDDED = "embedded"
    KUBERNETES = "kubernetes"


class BackendPlacement(models.TextChoices):
    OSMO = "osmo"
    KAI = "kai"


class Backend(models.Model):
    """One cluster that runs pods (API.md "Backends"). Pools name backends by `name`; nodes
    carry the name of theirs. Status is derived (`scheduler/backends/liveness.py`)."""

    name = models.CharField(max_length=63, unique=True)
    kind = models.CharField(max_length=10, choices=BackendKind.choices)
    placement = models.CharField(max_length=4, choices=BackendPlacement.choices,
                                 default=BackendPlacement.KAI)
    k8s_namespace = models.CharField(max_length=63, default="osmo")
    scheduler_name = models.CharField(max_length=253, blank=True, default="")
    description = models.TextField(blank=True, default="")
    k8s_uid = models.CharField(max_length=64, null=True, blank=True,
                               help_text="UID of the cluster's kube-system namespace, recorded "
                                         "at the agent's first connect.")
    version = models.CharField(max_length=64, blank=True, default="")
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    maintenance = models.BooleanField(default=False,
                                      help_text="Nothing new is dispatched; placed work stays.")
    created_date = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "backends"
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(name__regex=kai_names.DNS_LABEL_PATTERN),
                                   name="backend_name_dns_label",
                                   violation_error_message="A backend name is a DNS label."),
            models.CheckConstraint(condition=Q(kind__in=BackendKind.values),
                                   name="backend_kind_valid",
                                   violation_error_message="kind is embedded or kubernetes."),
            models.CheckConstraint(condition=Q(placement__in=BackendPlacement.values),
                                   name="backend_placement_valid",
                                   violation_error_message="placement is osmo or kai."),
            models.CheckConstraint(condition=Q(k8s_namespace__regex=kai_names.DNS_LABEL_PATTERN),
                                   name="backend_namespace_dns_label",
                                   violation_error_message="A namespace is a DNS label."),
        ]

    def __str__(self) -> str:
        return self.name
