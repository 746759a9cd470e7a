"""Historical usage per queue for KAI's time-based fair share, from the stored usage series.

`PoolUsageSample` holds each pool's (and subpool's) GPUs in use at every sample. A queue's
usage is KAI's: each sample weighted by `0.5 ** (age / OSMO_USAGE_HALF_LIFE)`, summed, and
normalized to what the cluster could have given over the same samples (the weights' sum times
the cluster's GPU capacity - the current one: the series keeps no past capacity). A top-level
pool's samples are its own work, so they are its `.shared` leaf's; a subpool's are its leaf's;
the core sums them up the queue tree. Off (empty) while `OSMO_USAGE_HALF_LIFE` is unset.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import connection
from django.db.models import Sum

from scheduler.kai.queues import queue_name_for

from .models import Node


def queue_usage(*, now: datetime, namespace: str, capacity: int | None = None
                ) -> dict[str, float]:
    """Leaf queue name -> normalized, decayed GPU usage (0..1)."""
    half_life = settings.OSMO_USAGE_HALF_LIFE
    if not half_life:
        return {}
    if capacity is None:
        capacity = Node.objects.filter(schedulable=True).aggregate(total=Sum("gpus"))["total"]
    if not capacity:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH weighted AS (SELECT s.pool_id, s.at, s.used_gpus + s.low_gpus AS gpus, "
            "  power(0.5, extract(epoch FROM (%s - s.at)) / %s) AS weight "
            "  FROM pool_usage_samples s WHERE s.at <= %s) "
            "SELECT p.name, sum(w.gpus * w.weight), "
            "  (SELECT sum(weight) FROM (SELECT DISTINCT at, weight FROM weighted) d) "
            "FROM weighted w JOIN pools p ON p.id = w.pool_id GROUP BY p.name",
            [now, float(half_life), now])
        rows = cursor.fetchall()
    usage = {}
    for pool, used, weights in rows:
        if used and weights:
            usage[queue_name_for(pool, namespace)] = float(used) / (float(weights) * capacity)
    return usage
