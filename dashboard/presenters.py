"""The dashboard's view models: plain data shaped for the templates, with no database reads.

`dashboard.queries` fetches the rows and hands them here; quota figures use the arithmetic of
`pools.quota`, the same as the REST API's, so a page and `GET /api/pool_quota` never disagree.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from osmo import config_history
from osmo.accounts.roles import Roles
from pools import quota
from pools.models import SNAPSHOT_DEFAULTS, Pool, SubpoolState
from scheduler.core.kai_names import DEFAULT_BACKEND, RACK_LABEL, ZONE_LABEL
from workflows.models import Priority

# --- bars ------------------------------------------------------------------------------------

def _pct(part: int, whole: int) -> str:
    """A CSS width; a string with a dot whatever the locale."""
    return f"{max(part, 0) * 100 / whole:.2f}" if whole > 0 else "0"


@dataclass(frozen=True)
class Bar:
    """Usage against a quota: HIGH/NORMAL GPUs, then LOW GPUs apart. The bar spans the larger of
    the quota and the usage, so over-quota usage shows past the quota mark."""

    quota: int
    used: int
    low: int

    @property
    def scale(self) -> int:
        return max(self.quota, self.used + self.low, 1)

    @property
    def used_pct(self) -> str:
        return _pct(self.used, self.scale)

    @property
    def low_pct(self) -> str:
        return _pct(self.low, self.scale)

    @property
    def quota_pct(self) -> str:
        return _pct(self.quota, self.scale)

    @property
    def over_quota(self) -> bool:
        return self.used > self.quota

    @property
    def label(self) -> str:
        text = f"{self.used} of {self.quota} GPUs used at HIGH/NORMAL priority"
        if self.low:
            text += f", plus {self.low} at LOW priority"
        if self.over_quota:
            text += f"; {self.used - self.quota} over quota"
        return text


# --- the pool tree ---------------------------------------------------------------------------

@dataclass(frozen=True)
class SubpoolView:
    name: str  # short name
    canonical_name: str
    parent: str
    state: str
    quota_gpus: int  # effective: 0 unless ACTIVE
    configured_quota_gpus: int
    used_gpus: int
    low_gpus: int
    available_gpus: int
    running_workflows: int

    @property
    def total_usage_gpus(self) -> int:
        return self.used_gpus + self.low_gpus

    @property
    def bar(self) -> Bar:
        return Bar(self.quota_gpus, self.used_gpus, self.low_gpus)

    @property
    def draining(self) -> bool:
        return self.state == SubpoolState.DELETING

    @property
    def gpus_held(self) -> int:
        return self.total_usage_gpus


@dataclass(frozen=True)
class Segment:
    """One slice of a parent's quota: a subpool's guarantee or the unallocated share."""

    label: str
    gpus: int
    pct: str
    unallocated: bool = False


@dataclass
class ParentView:
    name: str
    status: str
    description: str
    total_quota_gpus: int
    unallocated_gpus: int
    used_gpus: int
    low_gpus: int
    available_gpus: int
    can_admin: bool
    subpools: list[SubpoolView] = field(default_factory=list)  # ACTIVE and DELETING
    archived: list[SubpoolView] = field(default_factory=list)

    @property
    def bar(self) -> Bar:
        return Bar(self.unallocated_gpus, self.used_gpus, self.low_gpus)

    @property
    def allocation(self) -> list[Segment]:
        """How the parent's quota is split: ACTIVE subpools, then the unallocated share."""
        whole = max(self.total_quota_gpus, 1)
        segments = [Segment(s.name, s.quota_gpus, _pct(s.quota_gpus, whole))
                    for s in self.subpools if s.state == SubpoolState.ACTIVE]
        segments.append(Segment("unallocated", self.unallocated_gpus,
                                _pct(self.unallocated_gpus, whole), unallocated=True))
        return segments

    @property
    def all_used_gpus(self) -> int:
        return self.used_gpus + sum(s.used_gpus for s in self.subpools + self.archived)

    @property
    def all_low_gpus(self) -> int:
        return self.low_gpus + sum(s.low_gpus for s in self.subpools + self.archived)


def subpool_view(subpool, usage: quota.Usage) -> SubpoolView:
    effective = quota.effective_quota(subpool.subpool_state, subpool.quota_gpus)
    return SubpoolView(
        name=subpool.subpool_name, canonical_name=subpool.name, parent=subpool.parent_id,
        state=subpool.subpool_state, quota_gpus=effective,
        configured_quota_gpus=subpool.quota_gpus, used_gpus=usage.used_gpus,
        low_gpus=usage.total_usage_gpus - usage.used_gpus,
        available_gpus=quota.available(effective, usage.used_gpus),
        running_workflows=usage.running_workflows,
    )


def parent_views(tree, roles: Roles) -> list[ParentView]:
    parents = []
    for parent in tree.parents:
        subpools = tree.subpools.get(parent.name, [])
        own = tree.usage_of(parent)
        unallocated = quota.unallocated(parent.quota_gpus,
                                        [(s.subpool_state, s.quota_gpus) for s in subpools])
        view = ParentView(
            name=parent.name, status=parent.status, description=parent.description,
            total_quota_gpus=parent.quota_gpus, unallocated_gpus=unallocated,
            used_gpus=own.used_gpus, low_gpus=own.total_usage_gpus - own.used_gpus,
            available_gpus=quota.available(unallocated, own.used_gpus),
            can_admin=roles.can_admin(parent.name),
        )
        for subpool in subpools:
            row = subpool_view(subpool, tree.usage_of(subpool))
            (view.archived if row.state == SubpoolState.ARCHIVED else view.subpools).append(row)
        parents.append(view)
    return parents


@dataclass
class Hierarchy:
    parents: list[ParentView]

    @property
    def total_quota_gpus(self) -> int:
        return sum(p.total_quota_gpus for p in self.parents)

    @property
    def used_gpus(self) -> int:
        return sum(p.all_used_gpus for p in self.parents)

    @property
    def low_gpus(self) -> int:
        return sum(p.all_low_gpus for p in self.parents)


# --- one pool --------------------------------------------------------------------------------

@dataclass
class PoolPage:
    pool: Pool  # the page's pool (top-level or subpool)
    parent: ParentView
    subpool: SubpoolView | None  # set on a subpool's page

    @property
    def name(self) -> str:
        return self.pool.name

    @property
    def can_admin(self) -> bool:
        return self.parent.can_admin


@dataclass
class PoolWorkflows:
    running: list
    pending: list
    running_count: int
    pending_count: int


@dataclass(frozen=True)
class HistoryRow:
    at: Any
    pool: str
    actor: str | None
    action: str  # the event's code, e.g. `subpool_quota_changed`
    change: str
    revision: int | None = None  # the POOL config's revision the event is
    tags: tuple[str, ...] = ()
    description: str = ""

    @property
    def action_words(self) -> str:
        """`Subpool quota changed` for `subpool_quota_changed`."""
        return self.action.replace("_", " ").capitalize()


def _gpus(value: Any) -> str:
    return f"{value} GPU" if value == 1 else f"{value} GPUs"


def _platforms(value: Any) -> str:
    names = sorted(value) if isinstance(value, dict) else value
    return ", ".join(str(name) for name in names) if names else "none"


# The fields of a pool's audit snapshot (`pools.services.pool_snapshot`), in the order a
# history line gives them: the words for each and how its value reads.
AUDIT_FIELDS: tuple[tuple[str, str, Any], ...] = (
    ("quota_gpus", "quota", _gpus),
    ("limit_gpus", "limit", lambda value: "none" if value in (None, -1) else _gpus(value)),
    ("state", "state", str),
    ("status", "status", str),
    ("priority", "priority", str),
    ("weight", "over-quota weight", str),
    ("platforms", "platforms", _platforms),
    ("default_platform", "default platform", lambda value: value or "none"),
    ("description", "description", lambda value: f"“{_short(value)}”" if value else "none"),
    ("backends", "backends", _platforms),
    ("default_exit_actions", "default exit actions",
     lambda value: ", ".join(f"{k} {v}" for k, v in sorted(value.items())) or "none"),
    ("max_retries", "max retries", str),
    ("archived", "archived", lambda value: "yes" if value else "no"),
)


def describe_change(before: dict | None, after: dict | None) -> str:
    """An audit event in words: `quota 30 GPUs → 20 GPUs; state ACTIVE → DELETING` for a change,
    every set field for a creation (`quota 100 GPUs; limit none; status ONLINE; ...`)."""
    before, after = before or {}, after or {}
    known = {key for key, _words, _show in AUDIT_FIELDS} | {"name", "subpool_name"}
    others = [(key, key.replace("_", " "), _short) for key in sorted(set(after) - known)]
    parts = []
    for key, words, show in (*AUDIT_FIELDS, *others):
        old, new = before.get(key), after.get(key)
        if key in SNAPSHOT_DEFAULTS and "quota_gpus" in after and "subpool_name" not in after:
            # a top-level pool's snapshot leaves these out at their default
            old = before.get(key, SNAPSHOT_DEFAULTS[key]) if before else None
            new = after.get(key, SNAPSHOT_DEFAULTS[key])
            if old == new or (old is None and new == SNAPSHOT_DEFAULTS[key]):
                continue
            parts.append(f"{words} {show(new)}" if old is None
                         else f"{words} {show(old)} → {show(new)}")
            continue
        if key not in after or old == new:
            continue
        if key not in before:
            if key != "archived":  # a new pool is never archived: not worth saying
                parts.append(f"{words} {show(new)}")
        elif show(old) == show(new):  # e.g. a platform's settings, its name unchanged
            parts.append(f"{words} {show(new)} (settings changed)")
        else:
            parts.append(f"{words} {show(old)} → {show(new)}")
    return "; ".join(parts)


def _short(value: Any) -> str:
    text = "—" if value is None or value == "" else str(value)
    return text if len(text) <= 40 else text[:39] + "…"


def history_row(event) -> HistoryRow:
    """A PoolEvent row as one line of a pool's history."""
    return HistoryRow(event.at, event.pool.name, event.actor_name, event.action,
                      describe_change(event.before, event.after), event.revision,
                      tuple(event.tags), event.description)


@dataclass(frozen=True)
class FieldChange:
    name: str
    before: str
    after: str


@dataclass(frozen=True)
class RevisionView:
    """One revision of a pool's config: the event, and its fields before and after."""

    row: HistoryRow
    fields: list[FieldChange]
    previous: int | None  # the pool family's revisions either side, for the page's links
    following: int | None


def _shown(value: Any) -> str:
    if value is None:
        return "—"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def revision_view(event, previous: int | None, following: int | None) -> RevisionView:
    """What changed in one revision, field by field (`osmo config diff`'s reading)."""
    before, after = event.before, event.after
    if "subpool_name" not in (after or before or {}):
        # a top-level pool's snapshot leaves these out at their default (describe_change)
        before = {**SNAPSHOT_DEFAULTS, **before} if before else before
        after = {**SNAPSHOT_DEFAULTS, **after} if after else after
    fields = [FieldChange(name, _shown(change["before"]), _shown(change["after"]))
              for name, change in config_history.diff(before, after).items()]
    return RevisionView(history_row(event), fields, previous, following)


# --- the cluster -----------------------------------------------------------------------------

NO_LABEL = "(none)"


@dataclass(frozen=True)
class NodeRow:
    name: str
    gpus: int
    used_by_priority: dict[str, int]  # HIGH / NORMAL / LOW → GPUs held
    schedulable: bool = True
    backend: str = DEFAULT_BACKEND

    @property
    def used_gpus(self) -> int:
        return sum(self.used_by_priority.values())

    @property
    def free_gpus(self) -> int:
        return max(self.gpus - self.used_gpus, 0)

    @property
    def segments(self) -> list[Segment]:
        """GPUs held per priority as slices of the node (for its bar)."""
        whole = max(self.gpus, self.used_gpus, 1)
        return [Segment(p, self.used_by_priority.get(p, 0),
                        _pct(self.used_by_priority.get(p, 0), whole))
                for p in Priority.values]

    @property
    def label(self) -> str:
        held = ", ".join(f"{s.gpus} {s.label}" for s in self.segments if s.gpus)
        return f"{self.used_gpus} of {self.gpus} GPUs used" + (f" ({held})" if held else "")

    @property
    def state(self) -> str:
        """For the heat map and its filter: cordoned, full, busy (some used) or idle."""
        if not self.schedulable:
            return CORDONED
        if self.gpus and self.free_gpus == 0:
            return FULL
        return BUSY if self.used_gpus else IDLE

    @property
    def heat(self) -> int:
        """0 (idle) to 4 (every GPU held at HIGH/NORMAL): the cell's shade. LOW is drawn apart
        (`low_share`): a node full of preemptible work is not full for HIGH/NORMAL work."""
        if not self.gpus:
            return 0
        firm = self.used_gpus - self.used_by_priority.get(Priority.LOW, 0)
        return min(4, -(-firm * 4 // self.gpus))

    @property
    def low_share(self) -> str:
        """The percent of the node's GPUs held at LOW (the cell's striped part; "" if none)."""
        low = self.used_by_priority.get(Priority.LOW, 0)
        return _pct(low, max(self.gpus, self.used_gpus, 1)) if low else ""

    @property
    def title(self) -> str:
        return (f"{self.name}: {self.label}" + ("; cordoned" if not self.schedulable else ""))


CORDONED, FULL, BUSY, IDLE = "cordoned", "full", "busy", "idle"
NODE_STATES = (IDLE, BUSY, FULL, CORDONED)


@dataclass(frozen=True)
class ClusterFilter:
    """What the cluster page shows: a zone, a rack, nodes in a state, names containing text,
    one backend's nodes."""

    zone: str = ""
    rack: str = ""
    state: str = ""
    node: str = ""
    backend: str = ""

    def keeps(self, zone: str, rack: str, node: NodeRow) -> bool:
        return ((not self.zone or zone == self.zone) and (not self.rack or rack == self.rack)
                and (not self.state or node.state == self.state)
                and (not self.node or self.node in node.name)
                and (not self.backend or node.backend == self.backend))


def filter_zones(zones: list[ZoneGroup], chosen: ClusterFilter) -> list[ZoneGroup]:
    """The zones and racks that keep at least one node the filter keeps."""
    kept = []
    for zone in zones:
        racks = [RackGroup(rack.name, [n for n in rack.nodes
                                       if chosen.keeps(zone.name, rack.name, n)], rack.label)
                 for rack in zone.racks]
        racks = [rack for rack in racks if rack.nodes]
        if racks:
            kept.append(ZoneGroup(zone.name, racks))
    return kept


@dataclass
class RackGroup:
    name: str
    nodes: list[NodeRow] = field(default_factory=list)
    label: str = ""  # the name as shown under its zone (see `rack_label`)

    @property
    def gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def free_gpus(self) -> int:
        return sum(n.free_gpus for n in self.nodes)


@dataclass
class ZoneGroup:
    name: str
    racks: list[RackGroup] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return sum(r.gpus for r in self.racks)

    @property
    def free_gpus(self) -> int:
        return sum(r.free_gpus for r in self.racks)


QUEUE_FIGURES = ("deserved_gpus", "fair_share_gpus", "allocated_gpus",
                 "allocated_non_preemptible_gpus", "requested_gpus")


@dataclass(frozen=True)
class QueueRow:
    name: str
    parent: str | None
    deserved_gpus: int = 0
    fair_share_gpus: int = 0
    allocated_gpus: int = 0
    allocated_non_preemptible_gpus: int = 0
    requested_gpus: int = 0


@dataclass(frozen=True)
class PendingGang:
    podgroup: str
    workflow: str | None
    reasons: list[dict]  # [{code, message, ...}] as the scheduler explains them


@dataclass
class ClusterOverview:
    zones: list[ZoneGroup] = field(default_factory=list)
    queues: list[QueueRow] = field(default_factory=list)
    pending: list[PendingGang] = field(default_factory=list)
    last_cycle: dict | None = None

    @property
    def nodes(self) -> list[NodeRow]:
        return [n for z in self.zones for r in z.racks for n in r.nodes]

    @property
    def gpus(self) -> int:
        return sum(z.gpus for z in self.zones)

    @property
    def free_gpus(self) -> int:
        return sum(z.free_gpus for z in self.zones)

    @property
    def used_by_priority(self) -> dict[str, int]:
        totals = {p: 0 for p in Priority.values}
        for node in self.nodes:
            for priority, gpus in node.used_by_priority.items():
                totals[priority] = totals.get(priority, 0) + gpus
        return totals


def group_nodes(nodes: list[tuple[NodeRow, dict]]) -> list[ZoneGroup]:
    """Nodes (with their labels) grouped by zone, then rack; names sorted, unlabelled last."""
    tree: dict[str, dict[str, list[NodeRow]]] = defaultdict(lambda: defaultdict(list))
    for node, labels in nodes:
        tree[labels.get(ZONE_LABEL) or NO_LABEL][labels.get(RACK_LABEL) or NO_LABEL].append(node)

    def order(name: str) -> tuple[bool, str]:
        return name == NO_LABEL, name

    return [ZoneGroup(zone, [RackGroup(rack, sorted(racks[rack], key=lambda n: n.name),
                                       rack_label(zone, rack))
                             for rack in sorted(racks, key=order)])
            for zone, racks in sorted(tree.items(), key=lambda item: order(item[0]))]


def rack_label(zone: str, rack: str) -> str:
    """A rack's name under its zone's heading, without the zone's name it repeats
    (`zone-0-rack-3` in zone `zone-0` is `rack-3`): the part that tells racks apart."""
    rest = rack[len(zone):] if zone != NO_LABEL and rack.startswith(zone) else ""
    if rest[:1] in ("-", "_", ".", "/") and rest[1:]:
        return rest[1:]
    return rack




def node_row(node, used_by_priority: dict[str, int]) -> NodeRow:
    """A Node row with the GPUs its tasks hold per priority."""
    return NodeRow(name=node.name, gpus=int(getattr(node, "gpus", 0) or 0),
                   used_by_priority=used_by_priority,
                   schedulable=bool(getattr(node, "schedulable", True)),
                   backend=getattr(node, "backend", None) or DEFAULT_BACKEND)


def cluster_view(nodes, held: dict[str, dict[str, int]], status: dict) -> ClusterOverview:
    """Nodes (sorted by name) with GPUs held per node and priority, and the body of
    `GET /api/scheduler/status` (API.md): the queues' shares and the pending gangs."""
    rows = [(node_row(node, held.get(node.name, {})), getattr(node, "labels", None) or {})
            for node in nodes]
    return ClusterOverview(
        zones=group_nodes(rows),
        queues=[QueueRow(name=q.get("name", ""), parent=q.get("parent"),
                         **{f: int(q.get(f) or 0) for f in QUEUE_FIGURES})
                for q in status.get("queues", [])],
        pending=[PendingGang(p.get("podgroup", ""), p.get("workflow"), p.get("reasons", []))
                 for p in status.get("pending", [])],
        last_cycle=status.get("last_cycle"),
    )


# --- the backends ----------------------------------------------------------------------------

@dataclass(frozen=True)
class BackendRow:
    name: str
    kind: str
    placement: str
    status: str  # ONLINE, OFFLINE or MAINTENANCE (scheduler/backends/liveness.py)
    heartbeat_age_seconds: float | None  # None: no heartbeat (an embedded one needs none)
    nodes: int
    gpus: int
    gpus_free: int
    pools: list[str]
    pending: int  # gangs waiting for a placement there
    running: int

    @property
    def heartbeat_age(self) -> str:
        if self.heartbeat_age_seconds is None:
            return "none" if self.kind == "kubernetes" else "not needed"
        return f"{age(self.heartbeat_age_seconds)} ago"

    @property
    def gpus_used(self) -> int:
        return max(self.gpus - self.gpus_free, 0)

    @property
    def bar(self) -> str:
        """The percent of its GPUs in use (the row's bar)."""
        return _pct(self.gpus_used, max(self.gpus, 1))


def age(seconds: float) -> str:
    """"42 s", "3 min 05 s", "2 h 04 min", "3 d 2 h"."""
    whole = max(int(seconds), 0)
    days, rest = divmod(whole, 86400)
    if days:
        return f"{days} d {rest // 3600} h"
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def backend_row(backend, figures, *, status: str, gangs: dict[str, int], now) -> BackendRow:
    """A backend's row: its derived ``status``, its figures (nodes, GPUs, pools) and
    ``gangs`` ({"pending", "running"}) as of ``now``."""
    beat = backend.last_heartbeat
    return BackendRow(
        name=backend.name, kind=backend.kind, placement=backend.placement, status=status,
        heartbeat_age_seconds=None if beat is None else max((now - beat).total_seconds(), 0.0),
        nodes=figures.nodes, gpus=figures.gpus, gpus_free=figures.gpus_free,
        pools=list(figures.pools), pending=gangs.get("pending", 0),
        running=gangs.get("running", 0))


# --- usage over time -------------------------------------------------------------------------

CHART_WIDTH, CHART_HEIGHT = 600, 120
MIN_VISIBLE = 2  # chart units: a GPU in use never draws flat, however large the scale


@dataclass(frozen=True)
class UsageChart:
    """A top-level pool's GPU use over time, ending with its use now: filled SVG paths (HIGH/
    NORMAL used, used + LOW) and the quota line in a ``CHART_WIDTH`` × ``CHART_HEIGHT`` box
    whose top is ``scale`` GPUs, with a sentence for screen readers."""

    pool: str
    used: str
    total: str
    quota: str
    scale: int
    peak: int
    now_used: int
    now_low: int
    now_quota: int
    start: Any
    summary: str
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT


def _path(points: list[tuple[float, float]], *, area: bool) -> str:
    """An SVG path through the points; an area closes down to the baseline."""
    line = " L".join(f"{x:.1f},{y:.1f}" for x, y in points)
    if not area:
        return f"M{line}"
    return f"M{points[0][0]:.1f},{CHART_HEIGHT} L{line} L{points[-1][0]:.1f},{CHART_HEIGHT} Z"


def usage_chart(pool: str, rows: list[dict]) -> UsageChart:
    """``rows``: ``{at, used, low, quota}`` of one pool, oldest first, the last one its use now.
    A lone row spans the whole box."""
    first, last = rows[0]["at"], rows[-1]["at"]
    span = (last - first).total_seconds()
    peak = max(r["used"] + r["low"] for r in rows)
    scale = max(peak, *(r["quota"] or 0 for r in rows), 1)

    def y(value: int) -> float:
        height = value / scale * CHART_HEIGHT
        return CHART_HEIGHT - (max(height, MIN_VISIBLE) if value > 0 else 0)

    def points(value) -> list[tuple[float, float]]:
        if span <= 0:
            return [(0, y(value(rows[-1]))), (CHART_WIDTH, y(value(rows[-1])))]
        return [((r["at"] - first).total_seconds() / span * CHART_WIDTH, y(value(r)))
                for r in rows]

    now = rows[-1]
    quota = now["quota"] or 0
    return UsageChart(
        pool=pool,
        used=_path(points(lambda r: r["used"]), area=True),
        total=_path(points(lambda r: r["used"] + r["low"]), area=True),
        quota=_path(points(lambda r: r["quota"] or 0), area=False),
        scale=scale, peak=peak, now_used=now["used"], now_low=now["low"], now_quota=quota,
        start=first,
        summary=(f"{pool}: GPU use from {first:%H:%M} UTC to now ({len(rows) - 1} samples and "
                 f"the current figures): now {now['used']} GPUs used at HIGH/NORMAL and "
                 f"{now['low']} at LOW, quota {quota}; peak {peak} GPUs in use."))


def usage_charts(samples, now: list[dict]) -> list[UsageChart]:
    """A chart per pool of ``now`` (``{top, at, used, low, quota}``: each live pool's use now,
    in name order), drawn from its ``samples`` (the same shape, ordered by time) to now."""
    by_pool: dict[str, list[dict]] = defaultdict(list)
    for row in samples:
        by_pool[row["top"]].append(row)
    return [usage_chart(row["top"], [*by_pool[row["top"]], row]) for row in now]


# --- workflows ---------------------------------------------------------------------------------

def duration(start, end) -> str:
    """"1 h 02 min", "3 min 05 s", "42 s"; "-" before it started."""
    if start is None or end is None:
        return "-"
    seconds = max(int((end - start).total_seconds()), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {seconds:02d} s" if minutes else f"{seconds} s"


@dataclass(frozen=True)
class TaskView:
    name: str
    status: str
    reason: str
    gpus: int
    node: str
    exit_code: int | None
    started_at: Any
    finished_at: Any
    duration: str
    preempted_by: str


@dataclass(frozen=True)
class GroupView:
    name: str
    podgroup: str
    status: str
    depends_on: list[str]
    reasons: list[dict]  # why it waits (explain), empty once placed or ended
    tasks: list[TaskView]
    duration: str
    estimate: dict | None = None  # a reserved group's start estimate (explain)
    backend: str | None = None  # where it was dispatched (None until then)
    passed_over: list[dict] | None = None  # explain's backend_choice: why each other backend


def workflow_groups(workflow, explanation: dict, now) -> list[GroupView]:
    """Groups with their tasks, durations (running ones up to ``now``) and explain reasons."""
    reasons = {group["name"]: group["reasons"] for group in explanation["groups"]}
    estimates = {group["name"]: group.get("estimate") for group in explanation["groups"]}
    passed = {group["name"]: (group.get("backend_choice") or {}).get("passed_over")
              for group in explanation["groups"]}
    views = []
    for group in workflow.groups.all():
        tasks = [TaskView(task.name, task.status, task.reason or "", task.gpus,
                          task.node_name, task.exit_code, task.started_at, task.finished_at,
                          duration(task.started_at, task.finished_at or (
                              now if task.started_at else None)),
                          task.preempted_by)
                 for task in group.tasks.all()]
        views.append(GroupView(group.name, group.podgroup, group.status, group.depends_on,
                               reasons.get(group.name, []), tasks,
                               duration(group.started_at, group.finished_at or (
                                   now if group.started_at else None)),
                               estimates.get(group.name), group.backend,
                               passed.get(group.name)))
    return views
