"""Phase (4) of ``k8s_fill.py``'s fill, in a process of its own: the placement core without
the cycle's bookkeeping. It runs the backend's placement loop (``placement_loop``, the cluster
cache's LISTs begun before Django loads, as ``scheduler_process`` starts it), but NOT the loop
the product runs: its ``publish`` only keeps the totals, leaving out ``runner.publish_cycle``'s
per-cycle work (the cycle record, the pending gangs, the queue figures, the metrics and the
first-bind query), and it runs without a database and at WARNING logs. On SIGTERM it prints
its totals as one JSON line. A module of its own so that the process imports the product and
nothing of the benchmark's.

    python benchmarks/scheduler_alone.py KUBECONFIG
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(kubeconfig: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings")
    os.environ.setdefault("SECRET_KEY", "osmo-benchmark")
    os.environ.setdefault("DATABASE_URL", "postgresql://unused/none")  # no cycle record
    from django.conf import settings

    from scheduler.backends.kubernetes.scheduler_process import start_cache
    from scheduler.backends.spec import default_spec

    # The backend's spec as the product's scheduler process gets it, on this kubeconfig.
    spec = default_spec().with_(kind="kubernetes", placement="osmo", kubeconfig=kubeconfig)
    stop = threading.Event()
    cache, wake = start_cache({"settings": {}, "spec": asdict(spec)},
                              lambda: not stop.is_set())
    signal.signal(signal.SIGTERM, lambda *_: (stop.set(), wake.set()))
    import django

    django.setup()
    from osmo import process_gc
    from scheduler.backends.kubernetes.client import api_client
    from scheduler.backends.kubernetes.placement_loop import placement_loop

    process_gc.settle(busy=True)  # as the product's scheduler process does
    seen: dict = {}

    def publish(placement, figures) -> None:  # the totals only: no cycle bookkeeping
        seen.update(bound_total=placement.bound_total, cycles=placement.cycles,
                    calls=dict(placement.totals),
                    time_ms={k: round(v) for k, v in placement.time_totals.items()})

    placement_loop(lambda: not stop.is_set(), wake, spec=spec,
                   interval=settings.OSMO_K8S_INTERVAL,
                   client_factory=lambda: api_client(kubeconfig=kubeconfig), publish=publish,
                   cache=cache)
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
