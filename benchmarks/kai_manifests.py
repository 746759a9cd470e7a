"""KAI manifest throughput: build and validate the Queue hierarchy and PodGroups.

Run from the repository root: `.venv/bin/python benchmarks/kai_manifests.py [--pools 1000]
[--subpools 5] [--groups 10000]`. Pure Python (no database): the Queue hierarchy of
``--pools`` pools × ``--subpools`` subpools (one DELETING, one ARCHIVED per pool) and the
PodGroups + Pods of ``--groups`` workflow groups (specs parsed once with
``workflows.spec.parse_workflow_spec``; a flat gang and a two-level ``minSubGroup`` group).
Validation = the CRD schema (jsonschema) for Queues and PodGroups, plus the webhook rules
(``validate_podgroup``) for each PodGroup with its pods. Prints objects/s for each phase.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scheduler.core.podgroup_validation import validate_podgroup  # noqa: E402
from scheduler.kai.crd_validation import load_crd_schemas, validate_manifest  # noqa: E402
from scheduler.kai.podgroups import build_group_manifests  # noqa: E402
from scheduler.kai.queues import (  # noqa: E402
    PoolData,
    SubpoolData,
    build_queue_hierarchy,
    queue_name_for,
)
from workflows.spec import parse_workflow_spec  # noqa: E402

CRDS = ROOT.parent / "shared" / "reference" / "kai-crds"

SPEC = """
workflow:
  name: bench
  resources:
    default: {gpu: 1, cpu: 8, memory: 64Gi}
  groups:
  - name: train
    tasks:
    - {name: worker, image: nvcr.io/nvidia/pytorch:24.01, replicas: 4, lead: true}
  - name: serving
    scheduling:
      minSubGroup: 2
      subGroups:
      - {name: decode, minSubGroup: 2}
      - {name: decode-leaders, parent: decode, minMember: 1}
      - {name: decode-workers, parent: decode, minMember: 2}
      - {name: prefill, minSubGroup: 2}
      - {name: prefill-leaders, parent: prefill, minMember: 1}
      - {name: prefill-workers, parent: prefill, minMember: 2}
    tasks:
    - {name: decode-leader, image: vllm, lead: true, subGroup: decode-leaders}
    - {name: decode-worker, image: vllm, replicas: 2, subGroup: decode-workers}
    - {name: prefill-leader, image: vllm, subGroup: prefill-leaders}
    - {name: prefill-worker, image: vllm, replicas: 2, subGroup: prefill-workers}
"""


def rate(count: int, seconds: float) -> str:
    return f"{count:>7} objects in {seconds * 1000:8.1f} ms = {count / seconds:>10,.0f} objects/s"


def pools(count: int, subpools: int) -> list[PoolData]:
    states = ["ACTIVE"] * subpools
    if subpools >= 3:
        states[-1], states[-2] = "ARCHIVED", "DELETING"
    return [PoolData(name=f"pool{i:04d}", quota_gpus=1000, limit_gpus=2000, weight=2,
                     subpools=tuple(SubpoolData(f"pool{i:04d}--s{j}", states[j], 100)
                                    for j in range(subpools)))
            for i in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=1000)
    parser.add_argument("--subpools", type=int, default=5)
    parser.add_argument("--groups", type=int, default=10000)
    args = parser.parse_args()
    schemas = load_crd_schemas(CRDS)

    data = pools(args.pools, args.subpools)
    start = time.perf_counter()
    queues = build_queue_hierarchy(data, "osmo")
    built = time.perf_counter() - start
    start = time.perf_counter()
    failures = sum(bool(validate_manifest(q, schemas=schemas)) for q in queues)
    checked = time.perf_counter() - start
    print(f"Queues ({args.pools} pools x {args.subpools} subpools)")
    print(f"  build     {rate(len(queues), built)}")
    print(f"  validate  {rate(len(queues), checked)}  (CRD schema; {failures} invalid)")

    spec = parse_workflow_spec(SPEC)
    queue = queue_name_for("pool0000", "osmo")
    groups = [spec.groups[i % len(spec.groups)] for i in range(args.groups)]
    start = time.perf_counter()
    manifests = [build_group_manifests(group, workflow_name=f"bench-{i}", namespace="osmo",
                                       queue=queue, priority=("HIGH", "NORMAL", "LOW")[i % 3])
                 for i, group in enumerate(groups)]
    built = time.perf_counter() - start
    objects = sum(1 + len(m.pods) for m in manifests)
    start = time.perf_counter()
    schema_failures = sum(bool(validate_manifest(m.podgroup, schemas=schemas))
                          for m in manifests)
    schema_time = time.perf_counter() - start
    start = time.perf_counter()
    rule_failures = sum(not validate_podgroup(m.podgroup, m.pods).allowed for m in manifests)
    rule_time = time.perf_counter() - start
    print(f"PodGroups ({args.groups} groups, {objects - len(manifests)} pods)")
    print(f"  build     {rate(objects, built)}  (PodGroups + Pods)")
    print(f"  validate  {rate(len(manifests), schema_time)}  (CRD schema; "
          f"{schema_failures} invalid)")
    print(f"  rules     {rate(len(manifests), rule_time)}  (webhook rules with pods; "
          f"{rule_failures} denied)")
    return 1 if failures or schema_failures or rule_failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
