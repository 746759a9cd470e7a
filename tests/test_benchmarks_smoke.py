"""Every benchmark runs, in a smoke size, as a user runs it: each ``benchmarks/*.py`` script as
a subprocess of this interpreter with tiny size flags, asserting it exits 0 and prints its
result line — so that none of them rots unseen (one crashed for days on a helper's changed
arguments). The figures of a smoke size mean nothing; the run and its checks are what count.

The benchmarks that need ``../shared`` (the kube-apiserver, the KAI CRDs) skip without it,
saying why; in CI (``CI=true``) that absence fails instead (``tests/shared_data.py``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared_data import SHARED, missing

ROOT = Path(__file__).resolve().parents[1]
KUBE = "the real kube-apiserver"
CRDS = "the KAI CRDs"

# script (and, for a second mode of one, the flag naming it): (its smoke-size arguments, a
# pattern its result line matches, what of ../shared it needs)
SMOKE: dict[str, tuple[list[str], str, str | None]] = {
    "admission.py": (["--clients", "2", "--requests", "5"],
                     r"^submit/whoami throughput ratio: \d", None),
    "agent_fill.py": (["--nodes", "2", "--workflows", "8", "--runs", "1", "--floor-processes",
                       "1,2", "--floor-threads", "2", "--limit", "120"],
                      r"^  through the agent / floor: median [\d.]+ \(min–max", KUBE),
    "agent_fill.py --servers 2": (["--servers", "2", "--nodes", "2", "--workflows", "8",
                                   "--runs", "1", "--floor-processes", "1", "--floor-threads",
                                   "2", "--limit", "120"],
                                  r"^  through the agent / floor: median [\d.]+ \(min–max", KUBE),
    "agent_nodes.py": (["--nodes", "20", "--rounds", "1", "--patchers", "2", "--limit", "60"],
                       r"^node updates/s through the agent: \d+ \(20 updates waiting", KUBE),
    "end_to_end.py": (["--nodes", "2", "--workflows", "8", "--clients", "2",
                       "--web-workers", "1", "--limit", "60"],
                      r"^all RUNNING after [\d.]+ s \(8 running\)", None),
    "fleet_quality.py": (["--quick"], r"^  utilization fleet / one cluster: [\d.]+", None),
    "fleet_dispatch.py": (["--gangs", "20", "--nodes", "8", "--min-rate", "0"],
                          r"^fleet dispatch rate: \d+ gangs/s", None),
    "fleet_recovery.py": (["--gangs", "4", "--nodes", "2", "--runs", "1", "--lease", "8",
                           "--limit", "90"],
                          r"^recovery, lease end → every moved gang Running elsewhere: median "
                          r"[\d.]+ s", KUBE),
    "gang_start.py": (["--nodes", "2", "--gang", "1", "--gang-seconds", "3", "--warmup", "2",
                       "--after", "12", "--limit", "60"],
                      r"^gang start: [\d.]+ s after submission", None),
    "history.py": (["--workflows", "200", "--repeat", "3", "--bound", "20"],
                   r"^every ratio \(divided by the control.s\) ≤ 20(\.0)?: yes", None),
    "k8s_fill.py": (["fill", "gang", "rack", "--nodes", "2", "--workflows", "8", "--runs",
                     "1", "--floor-processes", "1,2", "--floor-threads", "2", "--limit", "60",
                     "--big-nodes", "64"],
                    r"^  product / floor: median [\d.]+ \(min–max [\d.]+–[\d.]+, 1 run\)", KUBE),
    "kai_manifests.py": (["--pools", "3", "--subpools", "2", "--groups", "10"],
                         r"^  rules .*", CRDS),
    "logs.py": (["--first-byte", "5", "--submits", "5", "--followers", "2", "--log-mib", "1"],
                r"^submit \(5 sequential\): p50 [\d.]+ ms", None),
    "metrics_overhead.py": (["--requests", "8", "--clients", "2", "--cycles", "2",
                             "--per-cycle", "5", "--nodes", "10"],
                            r"^recording a cycle's metrics alone: [\d.]+ ms", None),
    "placement_quality.py": (["--quick"], r"^instances=20 mean=[\d.]+ worst=[\d.]+", None),
    "pool_quota.py": (["--parents", "3", "--subpools", "2", "--requests", "5"],
                      r"^targets \(≤ 5 queries, p50 < 50 ms\): ", None),
    "scheduler.py": (["--quick", "--no-snapshots"],
                     r"^backlog that finds no reservation .* checked", None),
    "submit_to_pod.py": (["--workflows", "3", "--interval", "0.1"],
                         r"^\[submit→pod\] ms from POST to the pod in a watch: p50 \d+", KUBE),
}


def scripts() -> set[str]:
    """The benchmarks a user runs: the scripts of ``benchmarks/`` with a ``__main__``."""
    return {path.name for path in (ROOT / "benchmarks").glob("*.py")
            if 'if __name__ == "__main__":' in path.read_text()
            and path.name not in ("scheduler_alone.py", "floor_client.py")}  # run by k8s_fill


def test_every_benchmark_has_a_smoke_size() -> None:
    assert scripts() == {entry.split()[0] for entry in SMOKE}


def needs(what: str | None) -> None:
    if what == KUBE:
        from tests.kube_real.server import unavailable_reason

        reason = unavailable_reason()
        if reason:
            missing(f"{reason} (benchmark skipped)")
    elif what == CRDS and not (SHARED / "reference" / "kai-crds").is_dir():
        missing(f"needs the KAI CRDs in {SHARED / 'reference' / 'kai-crds'} (../shared beside "
                f"the checkout)")


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_the_benchmark_runs_in_a_smoke_size(script: str) -> None:
    arguments, result, what = SMOKE[script]
    needs(what)
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    done = subprocess.run([sys.executable, f"benchmarks/{script.split()[0]}", *arguments],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    assert re.search(result, done.stdout, re.M), done.stdout[-3000:]
