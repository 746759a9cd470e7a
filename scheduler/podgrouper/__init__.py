"""The pod grouper (seed 004), pure Python: owner walk, one plugin per kind, workload expansion.

Entry points: :func:`group_pod` (a pod and its owners → its PodGroup metadata) and
:func:`group_workload` (a submitted manifest → PodGroup and Pod manifests, OSMO priority and
GPUs). Add a kind with a module in ``plugins/`` (see :mod:`.registry`).
"""

from .kinds import grouper_for, registered_kinds
from .model import PodGroupMeta, SubGroupSpec, TopologySpec, WorkloadError
from .owners import SKIP_TOP_OWNER_KINDS, OwnerChain, index_lookup, owner_chain
from .registry import Grouper, register
from .workload import (
    KNOWN_PRIORITY_CLASSES,
    WorkloadGroup,
    WorkloadGrouping,
    group_pod,
    group_workload,
    pod_gpus,
    priority_from_class,
)

__all__ = [
    "KNOWN_PRIORITY_CLASSES",
    "SKIP_TOP_OWNER_KINDS",
    "Grouper",
    "OwnerChain",
    "PodGroupMeta",
    "SubGroupSpec",
    "TopologySpec",
    "WorkloadError",
    "WorkloadGroup",
    "WorkloadGrouping",
    "group_pod",
    "group_workload",
    "grouper_for",
    "index_lookup",
    "owner_chain",
    "pod_gpus",
    "priority_from_class",
    "register",
    "registered_kinds",
]
