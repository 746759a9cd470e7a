"""The embedded cluster (nodes, topology) and the scheduler's last cycle.

Pods are the workflow tasks themselves: a task bound to a node holds its GPUs (`Task.node_name`),
so bindings and usage are one table and can never disagree.
"""

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q

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
    """The last scheduling cycle's figures of one backend (a row each, replaced every cycle)."""

    backend = models.CharField(max_length=63, unique=True, default=kai_names.DEFAULT_BACKEND)
    at = models.DateTimeField()
    duration_ms = models.FloatField()
    bound = models.IntegerField()
    evicted = models.IntegerField()
    pending = models.IntegerField()
    queues = models.JSONField(default=list)
    pending_gangs = models.JSONField(default=list,
                                     help_text="[{podgroup, workflow, group, reasons}]")
    metrics = models.JSONField(default=dict, blank=True,
                               help_text="placement osmo: the cycle's timings and API calls")

    def __str__(self) -> str:
        return f"cycle at {self.at}"


class GroupDispatch(models.Model):
    """Kubernetes backend: one workflow group's objects on the cluster (PodGroup, pods, headless
    Service, file Secrets). The row is written BEFORE the first create call, so a crash between
    create and record leaves an intent that the next pass repeats (creates are idempotent) and
    that cleanup can always find. One row per group (unique): a group its exit action runs
    again keeps its row, whose ``retry_id`` says which run's objects it records — the cleaner
    deletes an earlier run's and then points the row at the group's new run."""

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
    retry_id = models.PositiveIntegerField(default=0, help_text="The group's run whose objects "
                                           "this row records.")

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
    """Kubernetes backend: the leader's last contact with the API server (a row per backend),
    read by `GET /api/health`."""

    backend = models.CharField(max_length=63, unique=True, default=kai_names.DEFAULT_BACKEND)
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


class BackendEvent(models.Model):
    """A backend's audit trail and the BACKEND config's revisions (osmo/config_history.py): one
    row per change, written in the change's transaction. A deleted backend's rows stay, so
    the backend is named, not referenced."""

    backend_name = models.CharField(max_length=63)
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150, null=True, blank=True,
                                  help_text="Kept even if the user is removed; null = system.")
    action = models.CharField(max_length=40)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True, help_text="null: the backend was deleted.")
    revision = models.PositiveIntegerField(unique=True)
    description = models.TextField(blank=True, default="")
    tags = ArrayField(models.CharField(max_length=63), default=list, blank=True)

    class Meta:
        db_table = "backend_events"
        ordering = ["-revision"]
        indexes = [models.Index(fields=["backend_name", "-revision"],
                                name="backend_events_name_revision")]
        constraints = [
            models.CheckConstraint(condition=Q(revision__gte=1),
                                   name="backend_events_revision_1",
                                   violation_error_message="Revisions count from 1."),
            models.CheckConstraint(condition=Q(action__regex=r"^[a-z][a-z_]*$"),
                                   name="backend_events_action_snake_case",
                                   violation_error_message="Actions are snake_case verbs."),
        ]

    def __str__(self) -> str:
        return f"r{self.revision} {self.backend_name} {self.action}"


class AgentMessage(models.Model):
    """A message a backend agent sent, kept by id so that a re-sent one changes nothing: the
    agent sends at least once (it re-sends what was not acked after a reconnect), the service
    applies each (backend, message id) once — the row is written in the same transaction as
    the message's effect, so an effect that failed leaves no row and the re-send applies it."""

    backend = models.CharField(max_length=63)
    message_id = models.CharField(max_length=64)
    type = models.CharField(max_length=32)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["backend", "message_id"],
                                    name="agent_message_unique_id",
                                    violation_error_message="A message id is applied once."),
        ]
        indexes = [models.Index(fields=["received_at"], name="agent_message_received")]

    def __str__(self) -> str:
        return f"{self.backend} message {self.message_id}"


class AgentLease(models.Model):
    """Which agent process leads a backend (``scheduler/backends/agent/lease.py``): the holder
    (an instance identity) renews it with every accepted request; another agent takes it at
    a register only once ``renewed_at`` is older than ``OSMO_AGENT_LEASE``. One row per
    backend, so two agents never both hold it."""

    backend = models.CharField(max_length=63, unique=True)
    holder = models.CharField(max_length=64, blank=True)
    acquired_at = models.DateTimeField()
    renewed_at = models.DateTimeField()
    transitions = models.PositiveIntegerField(default=0, help_text="Times it changed hands.")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(renewed_at__gte=F("acquired_at")),
                                   name="agent_lease_renewed_after_acquired",
                                   violation_error_message="A lease is renewed after it is "
                                                           "acquired."),
        ]

    def __str__(self) -> str:
        return f"{self.backend} led by {self.holder or '(unnamed agent)'}"


class AgentWorkKind(models.TextChoices):
    CREATE = "create"  # objects to create, in order (a group's Secrets, Service, PodGroup, pods)
    DELETE = "delete"  # a group's objects to delete (by its label selector)
    SYNC = "sync"  # the whole desired set of Queues and Topology


class AgentWork(models.Model):
    """One item of a backend's work queue: handed to its agent on every poll until acked, so
    an agent that reconnects gets everything it had not finished. Ids order the queue."""

    backend = models.CharField(max_length=63)
    kind = models.CharField(max_length=8, choices=AgentWorkKind.choices)
    payload = models.JSONField()
    group = models.ForeignKey("workflows.WorkflowGroup", on_delete=models.CASCADE, null=True,
                              blank=True, related_name="agent_work")
    created_at = models.DateTimeField(auto_now_add=True)
    acked_at = models.DateTimeField(null=True, blank=True)
    outcome = models.TextField(blank=True, default="",
                               help_text="What the agent said of it: empty when it was done.")

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=AgentWorkKind.values),
                                   name="agent_work_kind_valid",
                                   violation_error_message="kind is create, delete or sync."),
        ]
        indexes = [models.Index(fields=["backend", "id"], name="agent_work_unacked",
                                condition=Q(acked_at__isnull=True))]

    def __str__(self) -> str:
        return f"{self.backend} work {self.pk} ({self.kind})"
