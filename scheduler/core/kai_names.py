"""The names KAI Scheduler and the product agree on: API versions, every label and annotation
key, the default Topology, the OSMO priority classes, and the rules that turn product names into
Kubernetes names (DNS labels, label values, PodGroup, Pod and Queue names). One home, pure, so
every app may import it: the pure core, the manifest builders, the pod grouper, admission, the
snapshot and the Kubernetes backend alike. A test fails if a key is spelled out anywhere else."""

from __future__ import annotations

import hashlib
import re
from typing import Any

PODGROUP_API_VERSION = "scheduling.run.ai/v2alpha2"
PODGROUP_KIND = "PodGroup"
QUEUE_API_VERSION = "scheduling.run.ai/v2"
QUEUE_KIND = "Queue"
TOPOLOGY_API_VERSION = "kai.scheduler/v1alpha1"
TOPOLOGY_KIND = "Topology"
# What KAI's scheduler writes for its binder to post a pod's binding.
BINDREQUEST_API_VERSION = "scheduling.run.ai/v1alpha2"

QUEUE_LABEL = "kai.scheduler/queue"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
PODGROUP_ANNOTATION = "pod-group-name"
SKIP_PODGROUPER_ANNOTATION = "kai.scheduler/skip-podgrouper"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
# What KAI's pod grouper reads on a workload's top owner.
MIN_MEMBER_ANNOTATION = "kai.scheduler/batch-min-member"
TOPOLOGY_ANNOTATION = "kai.scheduler/topology"
REQUIRED_PLACEMENT_ANNOTATION = "kai.scheduler/topology-required-placement"
PREFERRED_PLACEMENT_ANNOTATION = "kai.scheduler/topology-preferred-placement"
IMPLICIT_SUBGROUP = "default"  # KAI's leaf for the pods of a PodGroup without subGroups
GPU_RESOURCE = "nvidia.com/gpu"

# Labels the product puts on what it creates.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "osmo"
NAMESPACE_LABEL = "osmo.namespace"
POOL_LABEL = "osmo.pool"
WORKFLOW_LABEL = "osmo.workflow"
GROUP_LABEL = "osmo.group"
TASK_LABEL = "osmo.task"
# Which run of its group an object belongs to (an exit action's RESCHEDULE runs it again):
# absent on objects dispatched before retries had a label, which were run 0.
RETRY_LABEL = "osmo.retry"

# Annotations: the full names behind shortened labels, and what the backend reads back.
WORKFLOW_NAME_ANNOTATION = "osmo/workflow-name"
GROUP_NAME_ANNOTATION = "osmo/group-name"
TASK_NAME_ANNOTATION = "osmo/task-name"
REPLICA_INDEX_ANNOTATION = "osmo/replica-index"
# A PodGroup's exec_timeout in seconds (our scheduler plans reservations on it).
EXEC_TIMEOUT_ANNOTATION = "osmo/exec-timeout"
POOL_NAME_ANNOTATION = "osmo/pool-name"
QUEUE_NAME_ANNOTATION = "osmo/queue-name"
MOVED_FROM_ANNOTATION = "osmo/moved-from"  # a consolidation move's replacement pod
GROUPER_ANNOTATION = "osmo/grouper"  # which pod-grouper plugin made a workload's PodGroup
OWNER_KIND_ANNOTATION = "osmo/owner-kind"
OWNER_NAME_ANNOTATION = "osmo/owner-name"

# Node labels of the default Topology, coarsest first.
ZONE_LABEL = "topology.osmo/zone"
BLOCK_LABEL = "topology.osmo/block"
RACK_LABEL = "topology.osmo/rack"
HOSTNAME_LABEL = "kubernetes.io/hostname"

DEFAULT_TOPOLOGY_NAME = "osmo-topology"
# Coarsest first, as the API contract's default Topology: (alias, node label).
DEFAULT_TOPOLOGY_LEVELS: tuple[tuple[str | None, str], ...] = (
    ("zone", ZONE_LABEL),
    ("block", BLOCK_LABEL),
    ("rack", RACK_LABEL),
    ("hostname", HOSTNAME_LABEL),
)

# OSMO priority → (PriorityClass name, value); LOW is the preemptible one.
PRIORITY_CLASS_NAMES = {"HIGH": "osmo-high", "NORMAL": "osmo-normal", "LOW": "osmo-low"}
PRIORITY_VALUES = {"HIGH": 125, "NORMAL": 100, "LOW": 50}

# --- backends --------------------------------------------------------------------------------

# The backend every installation has, and the one pools and nodes name unless told otherwise.
DEFAULT_BACKEND = "default"
# A backend's name and namespace: a DNS label (the database checks it too).
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"

# --- Kubernetes names ------------------------------------------------------------------------

_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_NOT_LABEL_VALUE = re.compile(r"[^A-Za-z0-9._-]+")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def dns_label(name: str, max_length: int = 63) -> str:
    """A valid DNS label for ``name``: unchanged when already valid, else cleaned + hashed."""
    if len(name) <= max_length and _DNS_LABEL.match(name):
        return name
    cleaned = _NOT_DNS.sub("-", name.lower()).strip("-")
    head = cleaned[: max_length - 9].strip("-")
    return f"{head}-{_digest(name)}" if head else _digest(name)


def label_value(value: str) -> str:
    """A valid Kubernetes label value (≤ 63, alphanumeric ends), shortened like dns_label."""
    if len(value) <= 63 and _LABEL_VALUE.match(value):
        return value
    cleaned = _NOT_LABEL_VALUE.sub("-", value).strip("-_.")
    head = cleaned[:54].strip("-_.")
    return f"{head}-{_digest(value)}" if head else _digest(value)


def podgroup_name(workflow_name: str, group_name: str) -> str:
    return dns_label(f"{workflow_name}-{group_name}")


def pod_name(podgroup: str, task_name: str, replica: int | None = None) -> str:
    suffix = "" if replica is None else f"-{replica}"
    return dns_label(f"{podgroup}-{task_name}{suffix}")


def retry_name(name: str, retry_id: int) -> str:
    """A pod's name in its group's run ``retry_id``: the first run's name unchanged, a rerun's
    with ``-r{retry_id}``, so a rerun's pod never takes its predecessor's name."""
    return name if not retry_id else dns_label(f"{name}-r{retry_id}")


def retry_of(metadata: dict) -> int:
    """The run an object of ours belongs to, from its labels (0 without the label)."""
    value = (metadata.get("labels") or {}).get(RETRY_LABEL, "0")
    return int(value) if isinstance(value, str) and value.isdigit() else 0


# --- Queue names (SCHEDULING.md "Queue hierarchy") --------------------------------------------

SHARED_SUFFIX = ".shared"
SUBPOOL_DELIMITER = "--"  # a subpool's canonical name is {parent}--{subpool}


def root_queue_full_name(namespace: str) -> str:
    return f"osmo-default-{namespace}"


def pool_queue_full_name(pool: str, namespace: str) -> str:
    """``pool``: a canonical name, top-level (``team``) or subpool (``team--a``)."""
    return f"osmo-pool-{namespace}-{pool}"


def shared_queue_full_name(pool: str, namespace: str) -> str:
    return f"{pool_queue_full_name(pool, namespace)}{SHARED_SUFFIX}"


def root_queue_name(namespace: str) -> str:
    return label_value(root_queue_full_name(namespace))


def pool_queue_name(pool: str, namespace: str) -> str:
    """The (possibly shortened) Queue name of a pool's container queue or a subpool leaf."""
    return label_value(pool_queue_full_name(pool, namespace))


def shared_queue_name(pool: str, namespace: str) -> str:
    return label_value(shared_queue_full_name(pool, namespace))


def queue_name_for(pool: Any, namespace: str) -> str:
    """The LEAF queue a workflow submitted to ``pool`` goes to.

    ``pool``: a canonical name (or anything with ``.name``). A subpool's workflows go to its
    own leaf; a top-level pool's own workflows go to its ``.shared`` leaf, whether or not it
    has subpools, so creating a subpool never moves running work.
    """
    name = getattr(pool, "name", pool)
    if not isinstance(name, str) or not name:
        raise ValueError(f"a pool name is needed, got {pool!r}")
    if SUBPOOL_DELIMITER in name:
        return pool_queue_name(name, namespace)
    return shared_queue_name(name, namespace)
