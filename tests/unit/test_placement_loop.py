"""Our scheduler's loop runs a cycle only while it may place: the backend agent passes its
lease (``may_place``), so a deposed or cut-off agent binds nothing while its cache keeps
changing; each cycle's figures go to ``publish``, and ``release`` is called at the end."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from scheduler.backends.kubernetes import placement_loop as loop
from scheduler.backends.spec import BackendSpec


class Cache:
    namespace = "osmo"

    def __init__(self) -> None:
        self.stopped = False

    def wait_synced(self, timeout: float) -> bool:
        return True

    def stop(self) -> None:
        self.stopped = True


def test_no_cycle_runs_while_the_loop_may_not_place_and_each_cycle_is_published(monkeypatch):
    cycles: list[float] = []

    class Placement:
        def __init__(self, kube, cache, **options) -> None:
            self.closed = False

        def cycle(self):
            cycles.append(time.monotonic())
            return SimpleNamespace(snapshot_ms=0.0, decide_ms=0.0)

        def close(self) -> None:
            self.closed = True

    monkeypatch.setattr(loop, "Placement", Placement)
    leads, stop, wake = threading.Event(), threading.Event(), threading.Event()
    published, released = [], []
    cache = Cache()
    spec = BackendSpec(name="east", kind="kubernetes", placement="osmo")
    thread = threading.Thread(target=loop.placement_loop, kwargs=dict(
        running=lambda: not stop.is_set(), wake=wake, spec=spec, interval=0.01,
        client_factory=lambda: None, cache=cache, may_place=leads.is_set,
        publish=lambda placement, figures: published.append(figures),
        release=lambda: released.append(True)))
    thread.start()
    try:
        time.sleep(0.5)  # woken every 10 ms, never leading
        assert (cycles, published) == ([], [])
        leads.set()
        deadline = time.monotonic() + 5
        while len(cycles) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(cycles) >= 3 and len(published) >= len(cycles) - 1
        leads.clear()
        time.sleep(0.1)  # a cycle begun before the lease ended finishes
        ran = len(cycles)
        time.sleep(0.5)
        assert len(cycles) == ran
    finally:
        stop.set()
        wake.set()
        thread.join(timeout=5)
    assert not thread.is_alive()
    assert cache.stopped and released == [True]
