"""Scheduling gauges read at scrape time (registered in ``SchedulerConfig.ready``): the queue
figures and pending gangs of the last cycle, from the row ``GET /api/scheduler/status`` reads,
the backend leader's last API-server contact, as ``/api/health`` judges it, and each backend's
reachability, heartbeat age, nodes and GPUs. The web tier
exports them wherever the scheduler runs, and a queue that is gone leaves no series behind."""

from __future__ import annotations

from collections import Counter as Tally

from django.conf import settings
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from scheduler.backends.health import heartbeat_age
from scheduler.backends.kubernetes.health import cluster_ok
from scheduler.backends.kubernetes.kai_readiness import PLACEMENT_REQUIREMENTS
from scheduler.backends.liveness import is_online
from scheduler.backends.selectors import backends_with_figures
from scheduler.backends.spec import default_spec
from scheduler.core.kai_names import DEFAULT_BACKEND, POOL_LABEL
from scheduler.kai.selectors import queue_manifests
from scheduler.models import ClusterBackendStatus
from scheduler.selectors import last_cycle

QUEUE_FIGURES = (
    ("deserved_gpus", "GPUs the queue deserves (its quota; -1: unlimited)."),
    ("fair_share_gpus", "The queue's fair share of GPUs after the last cycle."),
    ("allocated_gpus", "GPUs allocated to the queue's pods after the last cycle."),
    ("allocated_non_preemptible_gpus", "GPUs of the queue's non-preemptible pods."),
    ("requested_gpus", "GPUs the queue's running and pending pods request."),
)


class SchedulerCollector:
    """Gauges from the last cycle's stored figures (``SchedulerCycle``, the same row as
    ``GET /api/scheduler/status``) and the backend leader's last API-server contact."""

    def collect(self):
        cycle = last_cycle()
        if cycle is not None:
            pools = {q["metadata"]["name"]: q["metadata"].get("labels", {}).get(POOL_LABEL, "")
                     for q in queue_manifests(namespace=default_spec().namespace)}
            for key, text in QUEUE_FIGURES:
                family = GaugeMetricFamily(f"osmo_queue_{key}", text,
                                           labels=["queue_name", "parent_queue", "pool"])
                for queue in cycle.queues:
                    family.add_metric([queue["name"], queue.get("parent") or "",
                                       pools.get(queue["name"], "")], queue[key])
                yield family
            pending = GaugeMetricFamily(
                "osmo_scheduler_pending_gangs",
                "Gangs the last cycle left pending, by their first reason.", labels=["reason"])
            for reason, count in sorted(Tally(
                    (gang["reasons"][0]["code"] if gang["reasons"] else "unknown")
                    for gang in cycle.pending_gangs).items()):
                pending.add_metric([reason], count)
            yield pending
            yield GaugeMetricFamily("osmo_scheduler_last_cycle_timestamp_seconds",
                                    "When the last scheduling cycle ran (Unix time).",
                                    value=cycle.at.timestamp())
        if default_spec().is_kubernetes:
            yield from _backend_families()
        yield from _per_backend_families()


def _per_backend_families():
    """Each backend row's reachability, heartbeat age, nodes and GPUs (as
    `GET /api/configs/backend` shows them). A backend without a heartbeat (an embedded one
    needs none) has no heartbeat-age series."""
    now = timezone.now()
    up = GaugeMetricFamily("osmo_backend_up", "1 while the backend is reachable (an embedded "
                           "one always is; a kubernetes one while its heartbeats arrive "
                           "within the lease), maintenance aside; else 0.", labels=["backend"])
    age = GaugeMetricFamily("osmo_backend_heartbeat_age_seconds",
                            "Seconds since the backend's last heartbeat.", labels=["backend"])
    nodes = GaugeMetricFamily("osmo_backend_nodes", "Nodes of the backend.", labels=["backend"])
    gpus = GaugeMetricFamily("osmo_backend_gpus", "GPUs of the backend's nodes, used (held by "
                             "tasks) or free.", labels=["backend", "state"])
    for backend, figures in backends_with_figures():
        up.add_metric([backend.name], 1 if is_online(
            kind=backend.kind, last_heartbeat=backend.last_heartbeat, now=now,
            lease_seconds=settings.OSMO_BACKEND_LEASE) else 0)
        seconds = heartbeat_age(backend.last_heartbeat, now)
        if seconds is not None:
            age.add_metric([backend.name], seconds)
        nodes.add_metric([backend.name], figures.nodes)
        gpus.add_metric([backend.name, "used"], figures.gpus - figures.gpus_free)
        gpus.add_metric([backend.name, "free"], figures.gpus_free)
    yield from (up, age, nodes, gpus)


def _backend_families():
    yield GaugeMetricFamily(
        "osmo_backend_apiserver_reachable",
        "1 when the backend leader reached the Kubernetes API server recently (as "
        "/api/health's cluster), else 0.", value=1 if cluster_ok() else 0)
    row = ClusterBackendStatus.objects.filter(backend=DEFAULT_BACKEND).first()
    missing = GaugeMetricFamily(
        "osmo_backend_placement_missing",
        "What KAI placement lacks on the cluster, by requirement (crd, priorityclass, "
        "scheduler): how many of each the leader last found missing (as /api/health's "
        "placement).", labels=["requirement"])
    counts = dict.fromkeys(PLACEMENT_REQUIREMENTS, 0)
    for item in (row.placement_missing if row is not None else []):
        counts[item["requirement"]] = counts.get(item["requirement"], 0) + 1
    for requirement, count in counts.items():
        missing.add_metric([requirement], count)
    yield missing
    if row is not None:
        yield GaugeMetricFamily("osmo_backend_last_contact_timestamp_seconds",
                                "When the backend leader last reported (Unix time).",
                                value=row.checked_at.timestamp())
