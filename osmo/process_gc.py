"""The cyclic garbage collector of a long-running process (web workers, Celery, the backends and
the scheduler), set once the process has imported what it runs.

Left at Python's defaults, it took a fifth to two thirds of these processes' CPU while filling a
cluster with 4,000 jobs (measured with ``gc.callbacks``): every full collection walks the whole
heap — Django, DRF, the Kubernetes client and an informer's cache, hundreds of thousands of
objects that live as long as the process — and a steady stream of requests or watch events
starts one every few tens of thousands of allocations.

- What the process holds once it has started (modules, settings, URL patterns) is frozen out of
  every later collection (``gc.freeze``). In gunicorn's master this runs before the workers
  fork, so the workers also keep those pages shared.
- The youngest generation is collected after 50,000 new objects instead of 700, so what a
  request or a watch event allocates has mostly been freed by reference counting before any
  collection looks at it; a full collection runs at most every 20 × 20 such collections (and,
  as always, only once the objects surviving since the last one are a quarter of the heap).
  Cyclic garbage still goes, later.
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 20)


def settle() -> None:
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
