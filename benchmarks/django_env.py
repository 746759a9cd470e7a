"""Bootstraps Django for a benchmark on a throwaway embedded PostgreSQL (or DATABASE_URL)."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bootstrap() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    if "DATABASE_URL" not in os.environ:
        data = tempfile.mkdtemp(prefix="osmo-bench-")
        os.environ["OSMO_DATA_DIR"] = data
        # Removed at exit, after the server is stopped (its own exit hook, registered later,
        # runs first): each run's database is about 460 MB.
        atexit.register(shutil.rmtree, data, True)
    os.environ.setdefault("SECRET_KEY", "osmo-benchmark")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings")
    os.environ.setdefault("OSMO_LOG_LEVEL", "WARNING")
    import django

    from osmo.embedded import prepare_local_environment

    prepare_local_environment()
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
