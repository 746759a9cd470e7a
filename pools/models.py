"""One `pools` table with a parent edge (seed 002): top-level pools and their subpools.

Subpools store only what differs from their parent (name, parent edge, quota, state); every other
setting is read from the parent, so the two can never drift.
"""

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Concat

from scheduler.core.kai_names import (
    DEFAULT_BACKEND,
    SUBPOOL_DELIMITER,  # noqa: F401 - OSMO's naming rule
)

NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$"


def default_backends() -> list[str]:
    return [DEFAULT_BACKEND]


# Settings a pool's audit snapshot (services.pool_snapshot) leaves out while they keep their
# default, so that the events of pools that never set them (older ones included) read as before.
SNAPSHOT_DEFAULTS = {"default_exit_actions": {}, "max_retries": 3}


class SubpoolState(models.TextChoices):
    ACTIVE = "ACTIVE"
    DELETING = "DELETING"
    ARCHIVED = "ARCHIVED"


class PoolStatus(models.TextChoices):
    ONLINE = "ONLINE"
    OFFLINE = "OFFLINE"
    MAINTENANCE = "MAINTENANCE"


class Pool(models.Model):
    name = models.CharField(max_length=82, unique=True,
                            help_text="Canonical name: `team`, or `team--a` for a subpool.")
    parent = models.ForeignKey("self", to_field="name", db_column="parent_pool", null=True,
                               blank=True, on_delete=models.PROTECT, related_name="subpools")
    subpool_name = models.CharField(max_length=40, null=True, blank=True)
    subpool_state = models.CharField(max_length=8, choices=SubpoolState.choices, null=True,
                                     blank=True)
    quota_gpus = models.IntegerField(help_text="Guaranteed GPUs (for a subpool: the configured "
                                               "quota; it counts as 0 while DELETING).")
    # Top-level pools: Σ quota and count of their ACTIVE subpools, kept by the services in the
    # same transaction as every subpool change, so the partition invariant is a CHECK below and
    # admission reads it from the one row it locks.
    allocated_gpus = models.IntegerField(default=0)
    active_subpools = models.IntegerField(default=0)
    # The settings below belong to top-level pools; subpools inherit their parent's.
    description = models.TextField(blank=True, default="")
    limit_gpus = models.IntegerField(default=-1, help_text="-1: no limit.")
    weight = models.IntegerField(default=1, help_text="Over-quota weight of the pool's queue.")
    priority = models.IntegerField(default=100, help_text="Priority of the pool's queue.")
    platforms = models.JSONField(default=dict, blank=True)
    default_platform = models.CharField(max_length=63, blank=True, default="")
    default_exit_actions = models.JSONField(
        default=dict, blank=True, help_text="Exit action → exit codes, for the tasks whose "
                                            "spec's exitActions do not hold their code.")
    max_retries = models.IntegerField(default=3, help_text="Reschedules of one group at most.")
    # Backend names, in order of preference (the scheduler owns the backends: pools checks the
    # names through `pools.ports.backends`).
    backends = ArrayField(models.CharField(max_length=63), default=default_backends, blank=True)
    status = models.CharField(max_length=11, choices=PoolStatus.choices,
                              default=PoolStatus.ONLINE)
    archived_at = models.DateTimeField(null=True, blank=True,
                                       help_text="Set when a top-level pool is deleted.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "pools"
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["parent", "subpool_name"],
                                    name="pools_unique_subpool_name_per_parent",
                                    violation_error_message="This subpool name is taken."),
            models.CheckConstraint(
                condition=Q(parent__isnull=True, subpool_name__isnull=True,
                            subpool_state__isnull=True)
                | Q(parent__isnull=False, subpool_name__isnull=False,
                    subpool_state__isnull=False),
                name="pools_parent_subpool_both_or_neither",
                violation_error_message="A subpool needs a parent, a short name and a state.",
            ),
            models.CheckConstraint(
                condition=Q(parent__isnull=False)
                | (Q(name__regex=NAME_PATTERN) & ~Q(name__contains=SUBPOOL_DELIMITER)),
                name="pools_top_level_name_valid",
                violation_error_message="Invalid pool name.",
            ),
            models.CheckConstraint(
                condition=Q(parent__isnull=True)
                | (Q(subpool_name__regex=NAME_PATTERN)
                   & ~Q(subpool_name__contains=SUBPOOL_DELIMITER)
                   & Q(name=Concat(F("parent_id"), Value(SUBPOOL_DELIMITER),
                                   F("subpool_name")))),
                name="pools_subpool_name_canonical",
                violation_error_message="A subpool is named `{parent}--{subpool}`.",
            ),
            models.CheckConstraint(condition=Q(quota_gpus__gte=0), name="pools_quota_non_negative",
                                   violation_error_message="Quota cannot be negative."),
            models.CheckConstraint(
                condition=Q(allocated_gpus__gte=0, active_subpools__gte=0)
                & (Q(parent__isnull=True, allocated_gpus__lte=F("quota_gpus"))
                   | Q(parent__isnull=False, allocated_gpus=0, active_subpools=0)),
                name="pools_subpools_fit_in_parent",
                violation_error_message="ACTIVE subpool quotas exceed the pool's quota.",
            ),
            models.CheckConstraint(condition=Q(limit_gpus__gte=-1), name="pools_limit_valid",
                                   violation_error_message="Limit is -1 (none) or a count."),
            models.CheckConstraint(condition=Q(weight__gte=0), name="pools_weight_non_negative",
                                   violation_error_message="Weight cannot be negative."),
            models.CheckConstraint(condition=Q(max_retries__gte=0, max_retries__lte=100),
                                   name="pools_max_retries_range",
                                   violation_error_message="max_retries is 0 to 100."),
            models.CheckConstraint(
                condition=Q(parent__isnull=True) | Q(archived_at__isnull=True),
                name="pools_subpool_not_archived_at",
                violation_error_message="Subpools are archived through their state.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_subpool(self) -> bool:
        return self.parent_id is not None

    @property
    def top_level_name(self) -> str:
        return self.parent_id or self.name


class PoolEvent(models.Model):
    """The audit trail: one row per change, written in the same transaction as the change."""

    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="events")
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150, null=True, blank=True,
                                  help_text="Kept even if the user is removed; null = system.")
    action = models.CharField(max_length=40)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    # The event is also the POOL config's revision (osmo/config_history.py): numbered without
    # gaps across every pool, with what its author said of it.
    revision = models.PositiveIntegerField(unique=True)
    description = models.TextField(blank=True, default="")
    tags = ArrayField(models.CharField(max_length=63), default=list, blank=True)

    class Meta:
        db_table = "pool_events"
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["pool", "-at"], name="pool_events_pool_at"),
                   models.Index(fields=["pool", "-revision"], name="pool_events_pool_revision")]
        constraints = [
            models.CheckConstraint(condition=Q(revision__gte=1), name="pool_events_revision_1",
                                   violation_error_message="Revisions count from 1."),
            models.CheckConstraint(condition=Q(action__regex=r"^[a-z][a-z_]*$"),
                                   name="pool_events_action_snake_case",
                                   violation_error_message="Actions are snake_case verbs."),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.pool_id} {self.action}"


class PoolUsageSample(models.Model):
    """A pool's GPU use at one moment: the points of the dashboard's usage chart. Written by a
    periodic task (`pools.tasks.usage_sample`), kept for `OSMO_USAGE_RETENTION_HOURS`."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="usage_samples")
    at = models.DateTimeField()
    used_gpus = models.IntegerField(help_text="Held at HIGH/NORMAL priority.")
    low_gpus = models.IntegerField(help_text="Held at LOW priority.")
    quota_gpus = models.IntegerField(help_text="The pool's effective quota then.")

    class Meta:
        db_table = "pool_usage_samples"
        ordering = ["at"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "at"], name="pool_usage_sample_once"),
            models.CheckConstraint(condition=Q(used_gpus__gte=0, low_gpus__gte=0,
                                               quota_gpus__gte=0),
                                   name="pool_usage_sample_non_negative",
                                   violation_error_message="GPU figures are never negative."),
        ]
        indexes = [models.Index(fields=["at"], name="pool_usage_samples_at")]

    def __str__(self) -> str:
        return f"{self.pool_id} at {self.at:%H:%M}: {self.used_gpus}+{self.low_gpus} LOW"
