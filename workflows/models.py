"""Workflows, their groups (one gang each) and tasks, with OSMO's status names."""

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Upper


class Priority(models.TextChoices):
    HIGH = "HIGH"
    NORMAL = "NORMAL"
    LOW = "LOW"


# HIGH and NORMAL count toward quota; LOW is opportunistic and preemptible.
QUOTA_PRIORITIES = (Priority.HIGH, Priority.NORMAL)


class WorkflowStatus(models.TextChoices):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    FAILED_CANCELED = "FAILED_CANCELED"
    FAILED_PREEMPTED = "FAILED_PREEMPTED"
    FAILED_EVICTED = "FAILED_EVICTED"
    FAILED_BACKEND_ERROR = "FAILED_BACKEND_ERROR"
    FAILED_SUBMISSION = "FAILED_SUBMISSION"
    FAILED_EXEC_TIMEOUT = "FAILED_EXEC_TIMEOUT"
    FAILED_QUEUE_TIMEOUT = "FAILED_QUEUE_TIMEOUT"


ALIVE_WORKFLOW_STATUSES = (WorkflowStatus.PENDING, WorkflowStatus.RUNNING)


class TaskStatus(models.TextChoices):
    WAITING = "WAITING"
    SCHEDULING = "SCHEDULING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    FAILED_CANCELED = "FAILED_CANCELED"
    FAILED_PREEMPTED = "FAILED_PREEMPTED"
    FAILED_EVICTED = "FAILED_EVICTED"
    FAILED_BACKEND_ERROR = "FAILED_BACKEND_ERROR"
    FAILED_EXEC_TIMEOUT = "FAILED_EXEC_TIMEOUT"
    FAILED_QUEUE_TIMEOUT = "FAILED_QUEUE_TIMEOUT"


ALIVE_TASK_STATUSES = (TaskStatus.WAITING, TaskStatus.SCHEDULING, TaskStatus.RUNNING)
FINAL_TASK_STATUSES = tuple(s for s in TaskStatus if s not in ALIVE_TASK_STATUSES)

# A task holds its GPUs once it runs or is bound to a node, until it ends.
HOLDS_GPUS = Q(status="RUNNING") | Q(node_name__gt="", status__in=["WAITING", "SCHEDULING"])


class WorkflowKind(models.TextChoices):
    WORKFLOW = "workflow"
    WORKLOAD = "workload"


class Workflow(models.Model):
    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=8, choices=WorkflowKind.choices,
                            default=WorkflowKind.WORKFLOW)
    # Indexed by (pool, status) below; pools are never deleted, so no separate FK index.
    pool = models.ForeignKey("pools.Pool", on_delete=models.PROTECT, related_name="workflows",
                             db_index=False)
    priority = models.CharField(max_length=6, choices=Priority.choices,
                                default=Priority.NORMAL)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                             related_name="workflows")
    status = models.CharField(max_length=20, choices=WorkflowStatus.choices,
                              default=WorkflowStatus.PENDING)
    reason = models.CharField(max_length=60, null=True, blank=True)
    spec = models.TextField(blank=True, default="", help_text="The submitted spec, as sent.")
    rendered_spec = models.TextField(blank=True, default="",
                                     help_text="The spec after template rendering.")
    set_variables = models.JSONField(default=list, blank=True)
    set_string_variables = models.JSONField(default=list, blank=True)
    manifests = models.JSONField(null=True, blank=True,
                                 help_text="A workload's PodGroup and Pod manifests, as grouped.")
    gpus_requested = models.IntegerField(default=0)
    labels = models.JSONField(default=dict, blank=True,
                              help_text="Label name → value: the spec's `labels`, overridden "
                                        "by those given at submission.")
    tags = models.JSONField(default=list, blank=True,
                            help_text="Tags from the admins' list (OSMO_WORKFLOW_TAGS).")
    exec_timeout_seconds = models.IntegerField(
        null=True, blank=True, help_text="Each group's exec_timeout (the spec's, else the "
                                         "platform default); null: none.")
    queue_timeout_seconds = models.IntegerField(
        null=True, blank=True, help_text="Each group's queue_timeout; null: none.")
    # The app version it was submitted from (`osmo app submit`), kept as submitted: a later
    # rename or delete of the app leaves the record as it was.
    app_uuid = models.UUIDField(null=True, blank=True)
    app_name = models.CharField(max_length=63, null=True, blank=True)
    app_version = models.IntegerField(null=True, blank=True)
    submitted_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    logs_purged = models.BooleanField(
        default=False, help_text="Its logs and events are gone (OSMO_LOG_RETENTION_DAYS).")

    class Meta:
        ordering = ["-submitted_at", "-id"]
        # Pages newest (or oldest) first, over the whole history or within a pool and status;
        # the second also serves the alive workflows of a pool (its prefix).
        indexes = [models.Index(fields=["submitted_at", "id"], name="workflow_submitted"),
                   models.Index(fields=["pool", "status", "submitted_at", "id"],
                                name="workflow_pool_status_submitted"),
                   # Ended, logs not purged yet: retention walks only these, oldest end first.
                   models.Index(fields=["finished_at"], name="workflow_logs_to_purge",
                                condition=Q(logs_purged=False, finished_at__isnull=False)),
                   # `?name=` (contains, any case: Django's UPPER(name) LIKE UPPER('%x%')):
                   # trigrams of the upper-cased name find the few matches of a rare text.
                   GinIndex(OpClass(Upper("name"), name="gin_trgm_ops"),
                            name="workflow_name_trgm", fastupdate=False)]
        constraints = [
            models.CheckConstraint(condition=Q(gpus_requested__gte=0),
                                   name="workflow_gpus_non_negative",
                                   violation_error_message="GPU counts cannot be negative."),
        ]

    def __str__(self) -> str:
        return self.name


class WorkflowGroup(models.Model):
    # The unique (workflow, name) index serves lookups by workflow.
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="groups",
                                 db_index=False)
    name = models.CharField(max_length=63)
    position = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=20, choices=TaskStatus.choices,
                              default=TaskStatus.WAITING)
    reason = models.CharField(max_length=60, null=True, blank=True)
    podgroup = models.CharField(max_length=63, blank=True, default="")
    depends_on = models.JSONField(default=list, blank=True,
                                  help_text="Names of the groups that must complete first.")
    lead_task = models.CharField(max_length=63, blank=True, default="")
    gpus = models.IntegerField(default=0)
    backend = models.CharField(max_length=63, null=True, blank=True,
                               help_text="The backend's name it was dispatched to (null until "
                                         "then); a name, as a node's, not a key.")
    backend_moved_at = models.DateTimeField(
        null=True, blank=True, help_text="When the fleet last moved it to another backend (a "
                                         "waiting gang moves at most once per interval).")
    gang = models.JSONField(default=dict, blank=True,
                            help_text="The PodGroup's gang fields: minMember, minSubGroup, "
                                      "subGroups, topologyConstraint.")
    below_min_since = models.DateTimeField(null=True, blank=True,
                                           help_text="A running gang below its minimum since.")
    scheduling_at = models.DateTimeField(null=True, blank=True,
                                         help_text="When it last entered SCHEDULING (its "
                                                   "queue_timeout counts from here).")
    retry_id = models.PositiveIntegerField(default=0, help_text="How many times an exit "
                                                                "action rescheduled it.")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["workflow", "position"]
        constraints = [
            models.UniqueConstraint(fields=["workflow", "name"], name="group_unique_per_workflow",
                                    violation_error_message="Group names are unique."),
        ]
        # The alive ones, whatever the history: the backend's pass reads them every second.
        indexes = [models.Index(fields=["status"], name="group_alive",
                                condition=Q(status__in=ALIVE_TASK_STATUSES))]

    def __str__(self) -> str:
        return f"{self.workflow_id}/{self.name}"


class Task(models.Model):
    # The unique (group, name) index serves lookups by group.
    group = models.ForeignKey(WorkflowGroup, on_delete=models.CASCADE, related_name="tasks",
                              db_index=False)
    # Copied from the workflow at submission (they never change) so usage is a single-table
    # aggregate over the partial index of bound tasks, not a three-table join.
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="tasks")
    pool = models.ForeignKey("pools.Pool", on_delete=models.PROTECT, related_name="tasks",
                             db_index=False)  # read through the partial index below
    priority = models.CharField(max_length=6, choices=Priority.choices)
    name = models.CharField(max_length=63, help_text="`{task}`, or `{task}-{i}` for replicas.")
    spec_task = models.CharField(max_length=63, blank=True, default="")
    replica = models.PositiveIntegerField(null=True, blank=True)
    position = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=20, choices=TaskStatus.choices,
                              default=TaskStatus.WAITING)
    reason = models.CharField(max_length=60, null=True, blank=True)
    gpus = models.IntegerField(default=0)
    cpu_millis = models.BigIntegerField(default=0)
    memory_bytes = models.BigIntegerField(default=0)
    node_selector = models.JSONField(default=dict, blank=True)
    subgroup = models.CharField(max_length=63, blank=True, default="",
                                help_text="The leaf subgroup of this pod ('' without subgroups).")
    run_seconds = models.IntegerField(null=True, blank=True,
                                      help_text="Embedded cluster: `sleep N` runs N seconds.")
    sim_exit_code = models.IntegerField(null=True, blank=True,
                                        help_text="Embedded cluster: a command ending `exit M` "
                                                  "ends with M (null: 0).")
    node_name = models.CharField(max_length=253, blank=True, default="",
                                 help_text="Set once the task is bound: it then holds its GPUs.")
    exit_code = models.IntegerField(null=True, blank=True)
    exit_actions = models.JSONField(default=dict, blank=True,
                                    help_text="The spec's exitActions: action → exit codes.")
    retry_id = models.PositiveIntegerField(default=0, help_text="Its group's run: 0, then "
                                                                "one more per reschedule.")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    preempted_by = models.CharField(max_length=253, blank=True, default="",
                                    help_text="The PodGroup whose gang took this task's GPUs.")

    class Meta:
        ordering = ["group", "position"]
        constraints = [
            models.UniqueConstraint(fields=["group", "name"], name="task_unique_per_group",
                                    violation_error_message="Task names are unique."),
            models.CheckConstraint(condition=Q(gpus__gte=0), name="task_gpus_non_negative",
                                   violation_error_message="GPU counts cannot be negative."),
        ]
        # `task list` pages by start time, either way with nulls last.
        indexes = [models.Index(fields=["pool", "priority"], name="task_holding_gpus",
                                include=["gpus", "workflow"], condition=HOLDS_GPUS),
                   models.Index(fields=["started_at", "id"], name="task_started"),
                   models.Index(F("started_at").desc(nulls_last=True), F("id"),
                                name="task_started_desc"),
                   # `task list --pool …` (the client's default order): a pool's page by key
                   models.Index(fields=["pool", "started_at", "id"], name="task_pool_started"),
                   # The client's default `task list` and `--summary` (alive statuses): the
                   # few alive tasks, not the history's.
                   models.Index(fields=["started_at", "id"], name="task_alive_started",
                                condition=Q(status__in=ALIVE_TASK_STATUSES))]

    def __str__(self) -> str:
        return f"{self.group}/{self.name}"


class WorkflowNameCounter(models.Model):
    """Per spec name, the last number given: workflows are named `{spec name}-{n}`."""

    spec_name = models.CharField(max_length=90, unique=True)
    value = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.spec_name}: {self.value}"


class TaskLogChunk(models.Model):
    """A run of one task's log lines, already in OSMO's line format
    (``YYYY/MM/DD HH:MM:SS [task] text``), in the order they were appended (``id``).

    Both cluster backends write here (``workflows.logstore``): the embedded cluster's simulated
    lines as the task runs, the Kubernetes backend a pod's log read through ``pods/log``. A
    task's chunks are bounded in bytes; the oldest go first."""

    id = models.BigAutoField(primary_key=True)
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="+",
                                 db_index=False)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="+", db_index=False)
    lines = models.PositiveIntegerField()
    size = models.PositiveIntegerField(help_text="Bytes of `text` (UTF-8).")
    text = models.TextField()
    source_ns = models.BigIntegerField(
        default=0, help_text="Kubernetes: the pod log's timestamp (ns since the epoch) of the "
                             "chunk's last line, where the next read resumes.")
    retry_id = models.PositiveIntegerField(
        default=0, db_default=0, help_text="The run of the task's group these lines are of: "
                                           "each run's log is kept apart.")

    class Meta:
        indexes = [models.Index(fields=["task", "id"], name="tasklog_task_id"),
                   models.Index(fields=["workflow", "id"], name="tasklog_workflow_id")]

    def __str__(self) -> str:
        return f"{self.task_id}#{self.id} ({self.lines} lines)"


class TaskEvent(models.Model):
    """One thing that happened to a workflow or one of its tasks (``task`` null: the whole
    workflow), told in words: ``reason`` is a one-word kind (Submitted, Bound, Preempted...),
    ``message`` the rest. From our own lifecycle and, on Kubernetes, the pods' Events."""

    id = models.BigAutoField(primary_key=True)
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="+",
                                 db_index=False)
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="+", db_index=False)
    at = models.DateTimeField()
    reason = models.CharField(max_length=40)
    message = models.CharField(max_length=1000, blank=True, default="")
    retry_id = models.PositiveIntegerField(
        default=0, db_default=0, help_text="The run of the task's group it happened in (0 for "
                                           "the workflow's own): each run's events are told "
                                           "apart.")

    class Meta:
        indexes = [models.Index(fields=["workflow", "at", "id"], name="taskevent_workflow_at"),
                   models.Index(fields=["task"], name="taskevent_task")]

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


class TaskLogInterest(models.Model):
    """Someone reads a running task's log: until ``until``, the Kubernetes backend copies new
    lines from its pod's ``pods/log`` into the store as they come (the web tier has no
    access to the API server)."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, primary_key=True,
                                related_name="+")
    until = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.task_id} until {self.until}"
