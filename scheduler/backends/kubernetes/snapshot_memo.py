"""What the placement's snapshot keeps from one cycle to the next, so a cycle pays for what
changed and not for the whole cluster (350,000 pods were 0.8 s of Python a cycle, read again
whether they changed or not).

Each pod has a *place* (:func:`SnapshotMemo.place_of`): a member of its gang (with its node),
capacity it holds on a node (``foreign``: other schedulers' pods, pods without a PodGroup;
``terminating``: ours being deleted), a pod whose delete must be done again (``leaving``), a
replacement of no move (``orphan``), or nothing (finished). The memo keeps every pod's place,
each gang's members and each node's held totals, and :meth:`SnapshotMemo.refresh` brings them up
to the cache: it re-places only the pods the informers' journals name (:meth:`Informer.changes`),
the pods of a PodGroup that appeared or went away, the pods bound this cycle or the last that the
cache does not show bound yet (``assumed``), and the replacements of a pod that changed (whether
one is an orphan is that pod's state). A cache without journals, or a re-list, places every pod
again. The gangs whose members, PodGroup or stale time changed are marked ``dirty`` for the
builder (:mod:`.snapshot`) to build again; a build that fails forgets everything.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from sys import intern
from typing import Any

from scheduler.core.decode import pod_requests
from scheduler.core.kai_names import MOVED_FROM_ANNOTATION, PODGROUP_ANNOTATION
from scheduler.core.node_totals import total

from .cache import FINISHED
from .moves import is_leaving

FOREIGN, TERMINATING = "foreign", "terminating"
LEAVING, ORPHAN = "leaving", "orphan"


def is_ours(pod: dict[str, Any], scheduler_name: str) -> bool:
    return (pod.get("spec") or {}).get("schedulerName") == scheduler_name


def is_live(pod: dict[str, Any]) -> bool:
    return ((pod.get("status") or {}).get("phase") or "Pending") not in FINISHED


def is_orphan(pod: dict[str, Any], cache) -> bool:
    """A replacement whose pod was never marked moved or released (the scheduler stopped
    between the two writes, or the mark failed): it must not run beside the pod it was made
    for."""
    metadata = pod["metadata"]
    moved_from = (metadata.get("annotations") or {}).get(MOVED_FROM_ANNOTATION)
    if not moved_from:
        return False
    original = cache.pods.get(f"{metadata.get('namespace')}/{moved_from}")
    return original is not None and not is_leaving(original)


def facts_of(pod: dict[str, Any], namespace: str, scheduler_name: str) -> tuple:
    """(live, spec.nodeName, deleting, PodGroup if ours and live, leaving, the key of the pod
    it replaces if it has that PodGroup)."""
    metadata = pod["metadata"]
    annotations = metadata.get("annotations") or {}
    live = is_live(pod)
    ours = live and metadata.get("namespace") == namespace and is_ours(pod, scheduler_name)
    group = annotations.get(PODGROUP_ANNOTATION) if ours else None
    moved_from = annotations.get(MOVED_FROM_ANNOTATION) if group is not None else None
    return (live, (pod.get("spec") or {}).get("nodeName"),
            bool(metadata.get("deletionTimestamp")), group,
            is_leaving(pod), f"{namespace}/{moved_from}" if moved_from else None)


class MemberPods(Mapping):
    """The index's pod key → pod of every gang member, read from the memo (valid until the
    memo's next refresh): copying 350,000 entries a cycle cost more than the lookups."""

    def __init__(self, pods: dict[str, tuple]):
        self._pods = pods

    def __getitem__(self, key: str) -> dict[str, Any]:
        entry = self._pods.get(key)
        if entry is None or entry[2] is None or entry[2][0] is None:
            raise KeyError(key)
        return entry[0]

    def __iter__(self) -> Iterator[str]:
        return (key for key, entry in self._pods.items()
                if entry[2] is not None and entry[2][0] is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class SnapshotMemo:
    """The pods' places, gangs' members and nodes' held totals (see the module), and what the
    builder made of each gang (``gangs``: group → (gang name, PodGroup, Gang or None, pod
    names, why skipped or None, what its bound pods hold per node))."""

    def __init__(self) -> None:
        self.cursors: dict[str, tuple[int, int] | None] = {"pods": None, "podgroups": None}
        self.pods: dict[str, tuple] = {}  # key → (pod, facts, place)
        self.podgroups: dict[str, dict[str, Any]] = {}  # name → PodGroup
        self.members: dict[str, dict[str, tuple]] = {}  # group → key → (pod, node)
        self.naming: dict[str, set[str]] = {}  # group → keys of our live pods that name it
        self.held: dict[str, dict[str, list[int]]] = {FOREIGN: {}, TERMINATING: {}}
        self.marked: dict[str, dict[str, dict[str, Any]]] = {LEAVING: {}, ORPHAN: {}}
        self.replacing: dict[str, set[str]] = {}  # pod → its replacements, placed again
        # when it changes (whether one is an orphan is its original's state)
        self.assumed: dict[str, str] = {}
        self.below_min: dict[str, float] = {}
        self.gangs: dict[str, tuple] = {}
        # kept with ``gangs`` (see ``keep_gang``), per node: what the bound pods of gangs left
        # out of the snapshot hold; the snapshot's gangs' releases there (group → entries),
        # and the nodes whose releases changed since the last build
        self.left_out: dict[str, list[int]] = {}
        self.releases: dict[str, dict[str, list[tuple]]] = {}
        self.moved_releases: set[str] = set()
        self.dirty: set[str] = set()
        self.context: tuple = ()  # (namespace, scheduler name) the places were made for
        self.shape: tuple = ()  # (node names, queue names, parent queues) the gangs read
        self.nodes: dict[str, tuple] = {}  # name → (object, foreign held, free, core Node)

    def forget(self) -> None:
        """Keep nothing: the next refresh reads everything."""
        self.__init__()

    def keep_gang(self, group: str, built: tuple | None) -> None:
        """``group``'s gang as the builder made it now (None: it has none), and the nodes'
        releases (or, for a gang left out, held totals) with it."""
        old = self.gangs.pop(group, None)
        if built is not None:
            self.gangs[group] = built
        for entry, sign in ((old, -1), (built, 1)):
            if entry is not None and entry[4] is not None:
                for node, pods in entry[5].items():
                    held = self.left_out.setdefault(node, [0, 0, 0])
                    for i, amount in enumerate(total(pods)):
                        held[i] += sign * amount
        before = old[5] if old is not None and old[4] is None else {}
        after = built[5] if built is not None and built[4] is None else {}
        if before == after:  # built again the same: a status or a re-list's copy
            return
        for node in before.keys() | after.keys() if before else after:
            pods = after.get(node)
            if pods != before.get(node):
                gangs = self.releases.setdefault(node, {})
                if pods:
                    gangs[group] = pods
                else:
                    gangs.pop(group, None)
                self.moved_releases.add(node)

    # --- one pod -------------------------------------------------------------------------------
    def place_of(self, key: str, pod: dict[str, Any], facts: tuple, cache) -> tuple | None:
        """(group, node, held as, requests, mark) — see the module."""
        live, node, deleting, group, leaving, moved = facts
        if not live:
            return None
        # one string per node name, the nodes' own (see `snapshot`): the cycle looks up every
        # bound pod's node, and a look-up that finds the very key compares no characters
        node = intern(node) if node else self.assumed.get(key)
        mine = group is not None and group in self.podgroups
        mark = None
        if mine and not deleting and leaving:
            mark = LEAVING  # its delete failed after the mark: done again
            deleting = True
        if mine and not deleting:
            if moved and is_orphan(pod, cache):
                return None, None, None, None, ORPHAN
            return group, node, None, None, None
        if not node:
            return None, None, None, None, mark
        return None, node, TERMINATING if mine else FOREIGN, pod_requests(pod), mark

    def _put(self, key: str, pod: dict[str, Any] | None, cache, namespace: str,
             scheduler_name: str) -> None:
        old = self.pods.get(key)
        if pod is None:
            if old is None:
                return
            facts = place = None
        else:
            facts = (old[1] if old is not None and old[0] is pod
                     else facts_of(pod, namespace, scheduler_name))
            place = self.place_of(key, pod, facts, cache)
            if old is not None and old[0] is pod and old[2] == place:
                return
        old_place = old[2] if old is not None else None
        self._hold(key, old_place, -1)
        self._hold(key, place, 1, pod)
        old_group = old_place[0] if old_place is not None else None
        group = place[0] if place is not None else None
        if old_group is not None and old_group != group:
            members = self.members[old_group]
            del members[key]
            if not members:
                del self.members[old_group]
            self.dirty.add(old_group)
        if group is not None:
            self.members.setdefault(group, {})[key] = (pod, place[1])  # in place if it stays
            self.dirty.add(group)
        self._name(key, old[1] if old is not None else None, facts)
        if pod is None:
            del self.pods[key]
        else:
            self.pods[key] = (pod, facts, place)

    def _hold(self, key: str, place: tuple | None, sign: int, pod=None) -> None:
        if place is None:
            return
        _group, node, held_as, requests, mark = place
        if held_as is not None:
            totals = self.held[held_as].setdefault(node, [0, 0, 0])
            totals[0] += sign * requests.gpus
            totals[1] += sign * requests.cpu
            totals[2] += sign * requests.memory
        if mark is not None:
            if sign > 0:
                self.marked[mark][key] = pod
            else:
                self.marked[mark].pop(key, None)

    def _name(self, key: str, old: tuple | None, new: tuple | None) -> None:
        """Keep ``naming`` (which pods a PodGroup's arrival re-places) and ``replacing``."""
        for book, position in ((self.naming, 3), (self.replacing, 5)):
            before, after = old and old[position], new and new[position]
            if before == after:
                continue
            if before is not None:
                book[before].discard(key)
                if not book[before]:
                    del book[before]
            if after is not None:
                book.setdefault(after, set()).add(key)

    # --- the cache -----------------------------------------------------------------------------
    def refresh(self, cache, *, scheduler_name: str, assumed: dict[str, str],
                below_min: dict[str, float]) -> None:
        """Bring the places up to ``cache`` (see the module); ``dirty`` names the gangs to build
        again."""
        namespace = cache.namespace
        before, self.assumed = self.assumed, assumed
        changed_pods = _changes(cache.pods, self.cursors, "pods")
        changed_groups = _changes(cache.podgroups, self.cursors, "podgroups")
        context = (namespace, scheduler_name)
        if changed_pods is None or changed_groups is None or context != self.context:
            self.context = context
            self._reread(cache, namespace, scheduler_name)
        else:
            again: dict[str, dict[str, Any] | None] = {}
            for key, podgroup in changed_groups.items():
                name = key.split("/", 1)[1]
                if (podgroup is None) == (name in self.podgroups):  # came or went
                    again.update((k, self.pods[k][0]) for k in self.naming.get(name, ()))
                if podgroup is None:
                    self.podgroups.pop(name, None)
                else:
                    self.podgroups[name] = podgroup
                self.dirty.add(name)
            for key in [*assumed, *before, *(replacement for original in changed_pods
                                              for replacement in self.replacing.get(original, ()))]:
                entry = self.pods.get(key)
                if entry is not None and key not in changed_pods:
                    again[key] = entry[0]
            again.update(changed_pods)
            for key, pod in again.items():
                self._put(key, pod, cache, namespace, scheduler_name)
        prefix = f"{namespace}/"
        for gang_name in below_min.keys() ^ self.below_min.keys() | {
                name for name, since in below_min.items() if self.below_min.get(name) != since}:
            if gang_name.startswith(prefix):
                self.dirty.add(gang_name[len(prefix):])
        self.below_min = dict(below_min)

    def _reread(self, cache, namespace: str, scheduler_name: str) -> None:
        """Place every pod again; a gang whose PodGroup and members are equal to before stays
        clean (a re-list's copies equal what they replace)."""
        old_pods, old_members, old_groups = self.pods, self.members, self.podgroups
        self.pods, self.members, self.naming, self.replacing = {}, {}, {}, {}
        self.held = {FOREIGN: {}, TERMINATING: {}}
        self.marked = {LEAVING: {}, ORPHAN: {}}
        self.podgroups = {pg["metadata"]["name"]: pg for pg in cache.podgroups.items()}
        for pod in cache.pods.items():
            metadata = pod["metadata"]
            key = f"{metadata.get('namespace')}/{metadata['name']}"
            old = old_pods.get(key)
            facts = (old[1] if old is not None and old[0] is pod
                     else facts_of(pod, namespace, scheduler_name))
            place = self.place_of(key, pod, facts, cache)
            if place is not None:
                if place[0] is not None:
                    self.members.setdefault(place[0], {})[key] = (pod, place[1])
                else:
                    self._hold(key, place, 1, pod)
            if facts[3] is not None:  # ours and named: a PodGroup's or an original's change
                self._name(key, None, facts)  # places it again
            self.pods[key] = (pod, facts, place)
        self.dirty = (old_members.keys() - self.members.keys()) | {
            group for group, members in self.members.items()
            if old_members.get(group) != members
            or old_groups.get(group) != self.podgroups.get(group)}


def _changes(informer, cursors: dict, name: str) -> dict | None:
    """The informer's changes since the memo's cursor, or None: read everything."""
    changes = getattr(informer, "changes", None)
    if changes is None:
        return None
    cursors[name], changed = changes(cursors[name])
    return changed
