"""The KAI Queue hierarchy builder (pure): golden seed-002 tree, names, CRD validity."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.kai.crd_validation import validate_manifest
from scheduler.kai.podgroups import label_value
from scheduler.kai.queues import (
    PoolData,
    SubpoolData,
    build_queue_hierarchy,
    build_topology,
    depth_order,
    queue_name_for,
    root_queue_name,
)
from tests.shared_data import kai_schemas

REPO = Path(__file__).resolve().parents[3]
UNBOUNDED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")

SEED_002 = PoolData(
    name="team", quota_gpus=100,
    subpools=(SubpoolData("team--a", "ACTIVE", 30), SubpoolData("team--b", "ACTIVE", 40),
              SubpoolData("team--c", "ACTIVE", 20), SubpoolData("team--d", "DELETING", 8),
              SubpoolData("team--old", "ARCHIVED", 50)),
)


def queue(name, parent, gpu, *, pool=None, priority=100, namespace="osmo"):
    labels = {"app.kubernetes.io/managed-by": "osmo", "osmo.namespace": namespace}
    metadata = {"name": name, "labels": labels}
    if pool is not None:
        labels["osmo.pool"] = pool
        metadata["annotations"] = {"osmo/pool-name": pool}
    spec = {} if parent is None else {"parentQueue": parent}
    spec["priority"] = priority
    spec["resources"] = {"gpu": gpu, "cpu": UNBOUNDED, "memory": UNBOUNDED}
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": metadata,
            "spec": spec}


def gpu(quota, limit=-1, weight=1):
    return {"quota": quota, "limit": limit, "overQuotaWeight": weight}


def test_seed_002_golden_hierarchy() -> None:
    assert build_queue_hierarchy([SEED_002], "osmo") == [
        queue("osmo-default-osmo", None, gpu(-1)),
        queue("osmo-pool-osmo-team", "osmo-default-osmo", gpu(100), pool="team"),
        queue("osmo-pool-osmo-team.shared", "osmo-pool-osmo-team", gpu(10), pool="team"),
        queue("osmo-pool-osmo-team--a", "osmo-pool-osmo-team", gpu(30), pool="team--a"),
        queue("osmo-pool-osmo-team--b", "osmo-pool-osmo-team", gpu(40), pool="team--b"),
        queue("osmo-pool-osmo-team--c", "osmo-pool-osmo-team", gpu(20), pool="team--c"),
        queue("osmo-pool-osmo-team--d", "osmo-pool-osmo-team", gpu(0), pool="team--d"),
    ]


def test_pool_settings_flow_to_the_container_and_every_leaf() -> None:
    pool = PoolData(name="big", quota_gpus=64, limit_gpus=96, weight=3, priority=150,
                    subpools=(SubpoolData("big--x", "ACTIVE", 16),))
    root, container, shared, leaf = build_queue_hierarchy([pool], "prod")
    assert root["spec"] == {"priority": 100, "resources": {
        "gpu": gpu(-1), "cpu": UNBOUNDED, "memory": UNBOUNDED}}
    assert container["spec"]["resources"]["gpu"] == gpu(64, 96, 3)
    assert shared["spec"]["resources"]["gpu"] == gpu(48, -1, 3)
    assert leaf["spec"]["resources"]["gpu"] == gpu(16, -1, 3)
    assert {q["spec"]["priority"] for q in (container, shared, leaf)} == {150}
    assert [q["metadata"]["name"] for q in (root, container, shared, leaf)] == [
        "osmo-default-prod", "osmo-pool-prod-big", "osmo-pool-prod-big.shared",
        "osmo-pool-prod-big--x"]


def test_archived_pools_have_no_queues_and_pools_are_sorted() -> None:
    pools = [PoolData("zeta", 1), PoolData("gone", 5, archived=True), PoolData("alpha", 2)]
    names = [q["metadata"]["name"] for q in build_queue_hierarchy(pools, "osmo")]
    assert names == ["osmo-default-osmo", "osmo-pool-osmo-alpha", "osmo-pool-osmo-alpha.shared",
                     "osmo-pool-osmo-zeta", "osmo-pool-osmo-zeta.shared"]


def test_pool_without_subpools_still_has_its_shared_leaf_with_the_whole_quota() -> None:
    _, container, shared = build_queue_hierarchy([PoolData("solo", 12)], "osmo")
    assert shared["spec"]["resources"]["gpu"] == gpu(12)
    assert shared["spec"]["parentQueue"] == container["metadata"]["name"]


def test_unallocated_never_goes_negative() -> None:
    pool = PoolData("odd", 10, subpools=(SubpoolData("odd--a", "ACTIVE", 15),))
    assert pool.unallocated_gpus == 0


def test_queue_name_for_gives_the_leaf() -> None:
    assert queue_name_for("team", "osmo") == "osmo-pool-osmo-team.shared"
    assert queue_name_for("team--a", "osmo") == "osmo-pool-osmo-team--a"

    class Named:
        name = "team--b"

    assert queue_name_for(Named(), "ns") == "osmo-pool-ns-team--b"
    assert root_queue_name("osmo") == "osmo-default-osmo"


def test_long_names_are_shortened_deterministically_with_full_names_kept() -> None:
    namespace = "n" * 20
    parent, sub = "p" * 40, "s" * 40
    pool = PoolData(parent, 10, subpools=(SubpoolData(f"{parent}--{sub}", "ACTIVE", 4),))
    queues = build_queue_hierarchy([pool], namespace)
    leaf = queues[-1]
    full = f"osmo-pool-{namespace}-{parent}--{sub}"
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    assert leaf["metadata"]["name"] == full[:54] + "-" + digest
    assert len(leaf["metadata"]["name"]) == 63
    assert leaf["metadata"]["annotations"] == {"osmo/pool-name": f"{parent}--{sub}",
                                               "osmo/queue-name": full}
    assert leaf["metadata"]["labels"]["osmo.pool"] == label_value(f"{parent}--{sub}")
    # The leaf a workflow goes to, the pod label and the Queue object agree.
    assert queue_name_for(f"{parent}--{sub}", namespace) == leaf["metadata"]["name"]
    assert label_value(leaf["metadata"]["name"]) == leaf["metadata"]["name"]
    shared = queues[2]
    assert shared["metadata"]["name"] == queue_name_for(parent, namespace)
    assert shared["metadata"]["annotations"]["osmo/queue-name"] == \
        f"osmo-pool-{namespace}-{parent}.shared"
    assert leaf["spec"]["parentQueue"] == queues[1]["metadata"]["name"]
    assert build_queue_hierarchy([pool], namespace) == queues


def test_every_queue_and_the_topology_validate_against_the_crds() -> None:
    for manifest in [*build_queue_hierarchy([SEED_002], "osmo"), build_topology("osmo")]:
        assert validate_manifest(manifest, schemas=kai_schemas()) == [], \
            manifest["metadata"]["name"]


def test_default_topology_golden() -> None:
    assert build_topology("osmo") == {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "osmo-topology",
                     "labels": {"app.kubernetes.io/managed-by": "osmo",
                                "osmo.namespace": "osmo"}},
        "spec": {"levels": [
            {"alias": "zone", "nodeLabel": "topology.osmo/zone"},
            {"alias": "block", "nodeLabel": "topology.osmo/block"},
            {"alias": "rack", "nodeLabel": "topology.osmo/rack"},
            {"alias": "hostname", "nodeLabel": "kubernetes.io/hostname"},
        ]},
    }
    custom = build_topology("osmo", levels=[{"nodeLabel": "rack"}, ("host", "kubernetes.io/"
                                                                              "hostname")])
    assert custom["spec"]["levels"] == [{"nodeLabel": "rack"},
                                        {"alias": "host", "nodeLabel": "kubernetes.io/hostname"}]


def test_depth_order_puts_children_deeper() -> None:
    depths = depth_order(build_queue_hierarchy([SEED_002], "osmo"))
    assert depths["osmo-default-osmo"] == 0
    assert depths["osmo-pool-osmo-team"] == 1
    assert depths["osmo-pool-osmo-team--a"] == 2


NAMES = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?", fullmatch=True).filter(
    lambda n: "--" not in n)


@settings(max_examples=60, deadline=None)
@given(namespace=st.from_regex(r"[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?", fullmatch=True),
       parent=NAMES, subs=st.lists(NAMES, max_size=3, unique=True))
def test_names_are_always_valid_and_unique(namespace, parent, subs) -> None:
    pool = PoolData(parent, 10, subpools=tuple(SubpoolData(f"{parent}--{s}", "ACTIVE", 1)
                                               for s in subs))
    queues = build_queue_hierarchy([pool], namespace)
    names = [q["metadata"]["name"] for q in queues]
    assert len(set(names)) == len(names)
    for queue_manifest in queues:
        name = queue_manifest["metadata"]["name"]
        assert len(name) <= 63 and LABEL_VALUE.match(name) and DNS_SUBDOMAIN.match(name), name
        for value in queue_manifest["metadata"]["labels"].values():
            assert len(value) <= 63 and LABEL_VALUE.match(value)
        assert validate_manifest(queue_manifest, schemas=kai_schemas()) == []


def test_builder_and_podgrouper_import_no_django() -> None:
    code = ("import sys; import scheduler.kai.queues, scheduler.podgrouper; "
            "import scheduler.podgrouper.plugins; "
            "sys.exit(any(m == 'django' or m.startswith('django.') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0
