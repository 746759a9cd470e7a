"""The placement's cluster cache: informers (:mod:`.informer`: LIST + WATCH, 410 → re-list) of
Nodes, Pods of every namespace (bound pods of any scheduler hold capacity), PodGroups of our
namespace, Queues and Topologies — and which of their changes are worth a scheduling cycle."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from scheduler.backends.spec import BackendSpec, default_spec

from .client import PODGROUPS, QUEUES, Kube, lister
from .informer import Informer

TOPOLOGIES = ("kai.scheduler", "v1alpha1", "topologies")
FINISHED = ("Succeeded", "Failed")


class ClusterCache:
    """The five informers the placement reads; ``on_change`` wakes the cycle loop."""

    def __init__(self, kube_factory, *, namespace: str, watch_timeout: int = 300,
                 on_change=None):
        self.namespace = namespace
        self._kubes: list[Kube] = []

        def kube() -> Kube:
            made = kube_factory()
            self._kubes.append(made)
            return made

        def collection(path: str) -> Informer:
            name = path.rsplit("/", 1)[1]
            return Informer(name, lister(kube(), path), watch_timeout=watch_timeout,
                            on_change=on_change)

        group, version, plural = PODGROUPS
        self.nodes = collection("/api/v1/nodes")
        self.pods = collection("/api/v1/pods")
        self.podgroups = collection(f"/apis/{group}/{version}/namespaces/{namespace}/{plural}")
        self.queues = collection("/apis/{}/{}/{}".format(*QUEUES))
        self.topologies = collection("/apis/{}/{}/{}".format(*TOPOLOGIES))
        self.informers = [self.nodes, self.pods, self.podgroups, self.queues, self.topologies]
        self.threads: list[threading.Thread] = []

    def start(self, running, report=None) -> None:
        for informer in self.informers:
            thread = threading.Thread(
                target=informer.run, args=(running,), name=f"informer-{informer.name}",
                kwargs={"report": report}, daemon=True)
            thread.start()
            self.threads.append(thread)

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for informer in self.informers:
            if not informer.synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()
        for thread in self.threads:
            thread.join(timeout=10)
        for kube in self._kubes:
            kube.close()

    def relist(self) -> None:
        for informer in self.informers:
            informer.relist_requested = True


def placement_cache(client_factory: Callable[[], Any], wake: threading.Event, *,
                    watch_timeout: int, spec: BackendSpec | None = None) -> ClusterCache:
    """The placement's cache of ``spec``'s namespace (default: the `default` backend's), not
    yet started: a change worth a cycle sets ``wake``."""
    spec = spec or default_spec()
    scheduler_name = spec.scheduler_name  # read once: every watch event asks

    def on_change(informer: str, event_type: str, obj: dict[str, Any] | None) -> None:
        if wakes_scheduler(informer, event_type, obj, scheduler_name):
            wake.set()

    return ClusterCache(lambda: Kube(client_factory()), namespace=spec.namespace,
                        watch_timeout=watch_timeout, on_change=on_change)


def wakes_scheduler(informer: str, event_type: str, obj: dict[str, Any] | None,
                    scheduler_name: str) -> bool:
    """Is this change worth a cycle? Everything but a bound pod's progress (bound, Running:
    the kubelet's status writes) — those change nothing the core decides on."""
    if informer != "pods" or obj is None or event_type == "DELETED":
        return True
    spec, metadata = obj.get("spec") or {}, obj.get("metadata") or {}
    if not spec.get("nodeName"):
        return spec.get("schedulerName") == scheduler_name  # pending: ours to place
    return bool(metadata.get("deletionTimestamp")) or \
        ((obj.get("status") or {}).get("phase") in FINISHED)
