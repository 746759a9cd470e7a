"""The embedded cluster (nodes, topology) and the scheduler's last cycle.

Pods are the workflow tasks themselves: a task bound to a node holds its GPUs (`Task.node_name`),
so bindings and usage are one table and can never disagree.
"""

from django.db import models
from django.db.models import Q

DEFAULT_TOPOLOGY_LEVELS = [
    {"alias": "zone", "nodeLabel": "topology.osmo/zone"},
    {"alias": "block", "nodeLabel": "topology.osmo/block"},
    {"alias": "rack", "nodeLabel": "topology.osmo/rack"},
    {"alias": "hostname", "nodeLabel": "kubernetes.io/hostname"},
]


class Node(models.Model):
    name = models.CharField(max_length=253, unique=True)
    gpus = models.IntegerField()
    cpu_millis = models.BigIntegerField(default=0, help_text="CPU in millicores.")
    memory_bytes = models.BigIntegerField(default=0)
    labels = models.JSONField(default=dict, blank=True)
    schedulable = models.BooleanField(default=True, help_text="False: cordoned.")
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

    name = models.CharField(max_length=63, unique=True, default="osmo-topology")
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

    def __str__(self) -> str:
        return f"cycle at {self.at}"
