"""GET /api/pool_quota with 200 parent pools × 5 subpools: p50 latency and SQL query count.

Targets: ≤ 5 queries whatever the size; p50 < 50 ms. Runs the full Django stack in-process
(authentication, view, JSON rendering) against a real PostgreSQL.

    python benchmarks/pool_quota.py [--parents 200] [--subpools 5] [--requests 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.django_env import bootstrap, percentile  # noqa: E402


def seed(parents: int, subpools: int, workflows_per_pool: int) -> None:
    from pools.models import Pool, SubpoolState
    from workflows.models import Task, Workflow, WorkflowGroup

    Pool.objects.bulk_create(Pool(name=f"pool{i:03d}", quota_gpus=1000) for i in range(parents))
    Pool.objects.bulk_create(
        Pool(name=f"pool{i:03d}--s{j}", parent_id=f"pool{i:03d}", subpool_name=f"s{j}",
             subpool_state=SubpoolState.ACTIVE if j else SubpoolState.DELETING, quota_gpus=100)
        for i in range(parents) for j in range(subpools)
    )
    pools = list(Pool.objects.all())
    workflows = Workflow.objects.bulk_create(
        Workflow(name=f"wf-{p.pk}-{k}", pool=p, priority=("HIGH", "NORMAL", "LOW")[k % 3],
                 status="RUNNING") for p in pools for k in range(workflows_per_pool))
    groups = WorkflowGroup.objects.bulk_create(
        WorkflowGroup(workflow=w, name="g", status="RUNNING") for w in workflows)
    Task.objects.bulk_create(
        Task(group=g, workflow=g.workflow, pool=g.workflow.pool, priority=g.workflow.priority,
             name=f"t{t}", gpus=2, status="RUNNING", node_name=f"node-{t}")
        for g in groups for t in range(2))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parents", type=int, default=200)
    parser.add_argument("--subpools", type=int, default=5)
    parser.add_argument("--workflows-per-pool", type=int, default=2)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()

    bootstrap()
    from django.db import connection
    from rest_framework.test import APIClient

    from osmo.accounts import services

    seed(args.parents, args.subpools, args.workflows_per_pool)
    results = {}
    for role, groups in (("platform admin", ["osmo-admin"]), ("pool user (pool0*)",
                                                              ["osmo-pool0*-user"])):
        user = services.user_ensure(username=role.split()[0] + "-" + str(len(groups[0])),
                                    groups=groups)
        client = APIClient(HTTP_AUTHORIZATION=f"Bearer {services.token_issue(user=user)}")
        for _ in range(3):  # warm-up
            client.get("/api/pool_quota")
        queries: list[str] = []

        def count(execute, sql, params, many, context, queries=queries):
            queries.append(sql)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(count):
            response = client.get("/api/pool_quota")
        assert response.status_code == 200
        rows = response.json()["pools"]
        samples = []
        for _ in range(args.requests):
            start = time.perf_counter()
            client.get("/api/pool_quota")
            samples.append((time.perf_counter() - start) * 1000)
        results[role] = (len(rows), sum(len(r["subpools"]) for r in rows), len(queries),
                         statistics.median(samples), percentile(samples, 0.99))

    print(f"GET /api/pool_quota — {args.parents} parents × {args.subpools} subpools, "
          f"{args.requests} requests each")
    print(f"{'caller':<22}{'parents':>8}{'subpools':>9}{'queries':>8}{'p50 ms':>9}{'p99 ms':>9}")
    for role, (parents, subs, queries, p50, p99) in results.items():
        print(f"{role:<22}{parents:>8}{subs:>9}{queries:>8}{p50:>9.1f}{p99:>9.1f}")
    worst = max(results.values(), key=lambda r: r[3])
    ok = all(r[2] <= 5 for r in results.values()) and worst[3] < 50
    print(f"targets (≤ 5 queries, p50 < 50 ms): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
