"""Pure scheduling core: frozen snapshot in (`model`), decisions out (`run_cycle`).

No Django, no third-party imports: see tests/unit/scheduler_core/test_purity.py.
"""

from scheduler.core.cycle import run_cycle
from scheduler.core.model import (
    Gang,
    Node,
    Pod,
    Queue,
    ResourceQuota,
    SchedulerConfig,
    Snapshot,
    SubGroup,
    Topology,
    TopologyConstraint,
    TopologyLevel,
)
from scheduler.core.results import CycleResult

__all__ = [
    "CycleResult", "Gang", "Node", "Pod", "Queue", "ResourceQuota", "SchedulerConfig", "Snapshot",
    "SubGroup", "Topology", "TopologyConstraint", "TopologyLevel", "run_cycle",
]
