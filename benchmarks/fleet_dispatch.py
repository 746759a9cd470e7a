"""Fleet dispatch rate (issue 46): how many gangs a second the service sends to one of three
clusters, on the defaults.

Three embedded backends of different shapes (``a``: N × 8 GPUs, ``b``: N/2 × 8 GPUs, ``c``:
2N × 4 GPUs; ``--nodes`` N) serve one pool; ``--gangs`` workflows of a mixed stream (1 to 4
tasks of 1, 2, 4 or 8 GPUs, all fitting at once) are admitted through the admission service
(untimed). Timed: the fleet passes (``scheduler.backends.fleet.fleet_pass``) until every
gang is chosen a backend. Checked before the rate is printed: every group chosen exactly one
backend its pool names, no backend given more than its nodes hold, and then one embedded cycle
per backend (untimed) binds every gang wholly on the nodes of the backend chosen for it.
Exits non-zero below ``--min-rate`` gangs/s (default 100).

    python benchmarks/fleet_dispatch.py [--gangs 380] [--nodes 256] [--min-rate 100]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.checks import fail_on  # noqa: E402

SHAPES = ((1, 1), (1, 2), (2, 4), (1, 8), (4, 1), (2, 8), (4, 2))  # (tasks, GPUs each)


def spec(tasks: int, gpus: int) -> str:
    """One gang: a group of `tasks` tasks of `gpus` GPUs each."""
    lines = "\n".join(f"    - {{name: t{i}, image: x, command: [sleep, '600'], resource: r"
                      f"{', lead: true' if i == 0 else ''}}}"
                      for i in range(tasks))
    return (f"workflow:\n  name: fleet\n  groups:\n  - name: g\n    tasks:\n{lines}\n"
            f"  resources:\n    r: {{gpu: {gpus}, cpu: 1, memory: 1Gi}}\n")


def shapes(gangs: int, capacity: int, seed: int = 46) -> list[tuple[int, int]]:
    """A mixed stream that fits the fleet at once (half its GPUs at most, so whole-node
    gangs find whole nodes whatever the order)."""
    rng, out, total = random.Random(seed), [], 0
    while len(out) < gangs:
        tasks, gpus = rng.choice(SHAPES)
        if total + tasks * gpus > capacity // 2:
            tasks, gpus = 1, 1
        if total + tasks * gpus > capacity // 2:
            break
        out.append((tasks, gpus))
        total += tasks * gpus
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gangs", type=int, default=380)
    parser.add_argument("--nodes", type=int, default=256)
    parser.add_argument("--min-rate", type=float, default=100.0)
    args = parser.parse_args()

    from benchmarks.django_env import bootstrap

    bootstrap()
    from osmo.accounts import services as accounts
    from pools import services as pools
    from scheduler import services as scheduler
    from scheduler.backends import services as backends
    from scheduler.backends.embedded import cycle as embedded_cycle
    from scheduler.backends.fleet import fleet_pass
    from scheduler.models import Node
    from workflows.admission import workflow_submit
    from workflows.models import Task, WorkflowGroup

    clusters = {"a": (args.nodes, 8), "b": (max(1, args.nodes // 2), 8),
                "c": (args.nodes * 2, 4)}
    for name, (count, gpus) in clusters.items():
        backends.backend_upsert(name=name, kind="embedded")
        for i in range(count):
            scheduler.node_register(name=f"{name}-{i:04d}", gpus=gpus, cpu_millis=128_000,
                                    memory_bytes=2**40, labels={}, backend=name)
    capacity = sum(count * gpus for count, gpus in clusters.values())
    pools.pool_upsert(actor=None, name="fleet", quota_gpus=capacity, backends=list(clusters))
    user = accounts.user_ensure(username="bench", groups=["osmo-fleet-user"])
    stream = shapes(args.gangs, capacity)
    texts = {shape: spec(*shape) for shape in set(stream)}
    for shape in stream:
        workflow_submit(actor=user, pool="fleet", source=texts[shape])

    started = time.perf_counter()
    passes, chosen = 0, 0
    while chosen < len(stream) and passes < 100:
        summary = fleet_pass()
        chosen += summary.chosen
        passes += 1
    took = time.perf_counter() - started

    problems = []
    groups = list(WorkflowGroup.objects.values_list("pk", "backend", "gpus"))
    unchosen = [pk for pk, backend, _ in groups if backend not in clusters]
    if chosen != len(stream) or unchosen:
        problems.append(f"{chosen} of {len(stream)} chosen; {len(unchosen)} without a backend "
                        "of the pool")
    given: dict[str, int] = defaultdict(int)
    for _pk, backend, gpus in groups:
        given[backend] += gpus
    for name, (count, gpus) in clusters.items():
        if given[name] > count * gpus:
            problems.append(f"{name} given {given[name]} GPUs, holds {count * gpus}")
    fail_on("fleet choice", problems)
    embedded_cycle.cycles_run()
    node_of = dict(Node.objects.values_list("name", "backend"))
    where = defaultdict(set)
    for group_id, node in Task.objects.values_list("group_id", "node_name"):
        where[group_id].add(node_of.get(node))
    chosen_of = {pk: backend for pk, backend, _ in groups}
    wrong = [pk for pk in chosen_of if where[pk] != {chosen_of[pk]}]
    fail_on("fleet placement", [f"{len(wrong)} gang(s) not wholly bound on the backend chosen "
                                f"for them"] if wrong else [])

    rate = len(stream) / took
    spread = Counter(chosen_of.values())
    print(f"fleet: {len(stream)} gangs ({sum(t * g for t, g in stream)} GPUs) over 3 clusters "
          f"({', '.join(f'{n}: {c}×{g}' for n, (c, g) in clusters.items())}), "
          f"{passes} pass(es); chosen a: {spread['a']}, b: {spread['b']}, c: {spread['c']}; "
          "every gang bound wholly where chosen")
    print(f"fleet dispatch rate: {rate:.0f} gangs/s ({took:.2f} s; target ≥ "
          f"{args.min_rate:g})")
    if rate < args.min_rate:
        raise SystemExit(f"fleet dispatch rate {rate:.0f} gangs/s < {args.min_rate:g}")


if __name__ == "__main__":
    main()
