"""Admission gauges read at scrape time (registered in ``WorkflowsConfig.ready``)."""

from __future__ import annotations

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from pools.models import Pool

from .models import Workflow, WorkflowStatus


class WorkflowsCollector:
    """Admitted workflows no pod of which runs yet, per pool (every live pool, 0 included):
    one aggregate query."""

    def collect(self):
        counts = dict(Workflow.objects.filter(status=WorkflowStatus.PENDING)
                      .values_list("pool__name").annotate(count=Count("id")).order_by())
        family = GaugeMetricFamily("osmo_pending_workflows",
                                   "Admitted workflows waiting for their first pod to run, per "
                                   "pool.", labels=["pool"])
        for name in Pool.objects.filter(archived_at__isnull=True).order_by("name") \
                .values_list("name", flat=True):
            family.add_metric([name], counts.get(name, 0))
        yield family
