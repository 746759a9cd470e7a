"""Pool gauges read at scrape time (registered in ``PoolsConfig.ready``): the figures of
``GET /api/pool_quota`` for every live pool and subpool — quota, used, available (negative
when a pool runs over its quota), the subpools' states, and how far a DELETING subpool has
drained. Two queries, as the endpoint."""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily

from osmo.accounts.roles import Roles

from . import selectors
from .api.serializers import quota_report
from .models import SubpoolState

EVERY_POOL = Roles(username=None, platform_admin=True, backend=False, admin_patterns=(),
                   user_patterns=())
STATES = (SubpoolState.ACTIVE, SubpoolState.DELETING)


class PoolsCollector:
    def collect(self):
        report = quota_report(selectors.pool_tree(roles=EVERY_POOL, light=True,
                                                  include_archived_subpools=False),
                              include_archived=False)
        labels = ["pool", "parent"]
        quota = GaugeMetricFamily(
            "osmo_pool_quota_gpus", "GPUs a pool may use at HIGH/NORMAL: a subpool's quota, a "
            "parent's unallocated share.", labels=labels)
        total = GaugeMetricFamily("osmo_pool_total_quota_gpus",
                                  "A top-level pool's whole quota, its subpools' included.",
                                  labels=["pool"])
        used = GaugeMetricFamily("osmo_pool_used_gpus",
                                 "GPUs held by a pool's HIGH/NORMAL work.", labels=labels)
        available = GaugeMetricFamily("osmo_pool_available_gpus",
                                      "Quota minus used GPUs (negative when over quota).",
                                      labels=labels)
        state = GaugeMetricFamily("osmo_pool_subpool_state",
                                  "1 for a subpool's current state (ACTIVE, DELETING), else 0.",
                                  labels=["pool", "parent", "state"])
        drain_workflows = GaugeMetricFamily(
            "osmo_pool_drain_running_workflows",
            "Workflows a DELETING subpool still runs (0: drained).", labels=labels)
        drain_gpus = GaugeMetricFamily("osmo_pool_drain_gpus_held",
                                       "GPUs a DELETING subpool still holds.", labels=labels)
        for row in report["pools"]:
            total.add_metric([row["name"]], row["total_quota_gpus"])
            for pool, parent in [(row, "")] + [(sub, row["name"]) for sub in row["subpools"]]:
                names = [pool["name"], parent]
                quota.add_metric(names, pool["quota_gpus"])
                used.add_metric(names, pool["used_gpus"])
                available.add_metric(names, pool["available_gpus"])
                if parent:
                    for value in STATES:
                        state.add_metric(names + [value], int(pool["subpool_state"] == value))
                if "drain" in pool:
                    drain_workflows.add_metric(names, pool["drain"]["running_workflows"])
                    drain_gpus.add_metric(names, pool["drain"]["gpus_held"])
        yield from (quota, total, used, available, state, drain_workflows, drain_gpus)
