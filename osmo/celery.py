"""The Celery app: JSON only, configured from Django settings (`CELERY_*`).

Imported by the `osmo` package (so shared tasks bind to it in every process); only when this
process IS the `celery` command does it prepare the embedded database first, as `manage.py`
does — importing it anywhere else starts nothing.
"""

import os
import sys
from pathlib import Path

from celery import Celery, signals

from osmo import process_gc
from osmo.embedded import prepare_local_environment
from osmo.observability import tasks as _task_metrics  # noqa: F401 - connects its signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings")
if Path(sys.argv[0]).name == "celery" or Path(sys.argv[0]).parent.name == "celery":
    prepare_local_environment()  # `celery -A osmo ...` or `python -m celery -A osmo ...`

app = Celery("osmo")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.worker_ready.connect
@signals.beat_init.connect
def serve_metrics(**_kwargs) -> None:
    """OSMO_METRICS_PORT: the worker's (children included) or beat's own /metrics."""
    from osmo.observability.server import serve_if_configured  # needs the apps loaded

    serve_if_configured()


@signals.worker_init.connect
@signals.beat_init.connect
def settle_collector(**_kwargs) -> None:
    process_gc.settle()
