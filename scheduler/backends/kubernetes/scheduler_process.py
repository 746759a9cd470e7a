"""The entry point of the scheduler's own process (``placement: osmo``, spawned by the
backend leader): nothing here touches the ORM before ``django.setup()``, so the spawned
interpreter can import it first.

The cluster cache's informers start before Django loads its apps: their first LISTs — at a
restart, every pod and PodGroup of the cluster — are served while this process imports, on the
API server's own CPU, rather than after it (half a second of a 4,000-pod start)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from django.conf import settings

from osmo import process_gc
from scheduler.backends.spec import BackendSpec

from .cache import placement_cache
from .client import api_client


def running(stop, parent: int) -> Callable[[], bool]:
    """Until the parent says stop or is gone."""
    return lambda: not stop.is_set() and os.getppid() == parent


def start_cache(config: dict, running: Callable[[], bool]):
    """The parent's settings that matter here applied, the placement's cluster cache started
    (it imports no model): (cache, the event its changes set)."""
    for name, value in config["settings"].items():
        setattr(settings, name, value)
    wake = threading.Event()
    spec = BackendSpec(**config["spec"])
    cache = placement_cache(lambda: api_client(kubeconfig=spec.kubeconfig), wake,
                            watch_timeout=spec.watch_timeout, spec=spec)
    cache.start(running)
    return cache, wake


def main(stop, parent: int, config: dict) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings")
    cache, wake = start_cache(config, running(stop, parent))
    django.setup()
    from scheduler.backends.kubernetes.runner import placement_process

    process_gc.settle(busy=True)
    placement_process(stop, parent, config, cache, wake)
