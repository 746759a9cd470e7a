"""The names KAI Scheduler and the product agree on: API versions, labels, annotations, the
default Topology and the OSMO priority classes. One home, imported by the pure core, the
manifest builders, the pod grouper, the snapshot and the Kubernetes backend alike."""

from __future__ import annotations

PODGROUP_API_VERSION = "scheduling.run.ai/v2alpha2"
PODGROUP_KIND = "PodGroup"
QUEUE_API_VERSION = "scheduling.run.ai/v2"
QUEUE_KIND = "Queue"
TOPOLOGY_API_VERSION = "kai.scheduler/v1alpha1"
TOPOLOGY_KIND = "Topology"

QUEUE_LABEL = "kai.scheduler/queue"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
PODGROUP_ANNOTATION = "pod-group-name"
SKIP_PODGROUPER_ANNOTATION = "kai.scheduler/skip-podgrouper"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
IMPLICIT_SUBGROUP = "default"  # KAI's leaf for the pods of a PodGroup without subGroups
GPU_RESOURCE = "nvidia.com/gpu"

# Labels the product puts on what it creates.
NAMESPACE_LABEL = "osmo.namespace"
POOL_LABEL = "osmo.pool"
WORKFLOW_LABEL = "osmo.workflow"
GROUP_LABEL = "osmo.group"
TASK_LABEL = "osmo.task"

DEFAULT_TOPOLOGY_NAME = "osmo-topology"
# Coarsest first, as the API contract's default Topology: (alias, node label).
DEFAULT_TOPOLOGY_LEVELS: tuple[tuple[str | None, str], ...] = (
    ("zone", "topology.osmo/zone"),
    ("block", "topology.osmo/block"),
    ("rack", "topology.osmo/rack"),
    ("hostname", "kubernetes.io/hostname"),
)

# OSMO priority → (PriorityClass name, value); LOW is the preemptible one.
PRIORITY_CLASS_NAMES = {"HIGH": "osmo-high", "NORMAL": "osmo-normal", "LOW": "osmo-low"}
PRIORITY_VALUES = {"HIGH": 125, "NORMAL": 100, "LOW": 50}
