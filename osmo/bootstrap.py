"""The ``OSMO_*`` knobs read before the settings exist — the one exception to "read once, in
``osmo/settings.py``" (a test fails on a read anywhere else). They decide what the settings
need to load at all: the data folder the embedded PostgreSQL lives in, the web workers the
database's connections are sized for (``osmo.capacity``, which gunicorn's config and the
embedded PostgreSQL read before Django is set up), whether ``osmo standalone`` prepares
Prometheus' multiprocess folder for its children, and the KAI CRD folder of the pure validators
(their tools and tests run without settings). The settings take ``OSMO_METRICS`` from here too,
so each knob is read in one place. Each is read when asked, not at import: a standalone sets
some of them for its children."""

from __future__ import annotations

import os

TRUE = {"1", "true", "yes", "on"}
KAI_CRDS_DIR = "OSMO_KAI_CRDS_DIR"


def data_dir() -> str:
    """``OSMO_DATA_DIR`` as given ('' when unset)."""
    return os.environ.get("OSMO_DATA_DIR", "")


def web_workers() -> int | None:
    """``OSMO_WEB_WORKERS`` when it is a positive number (``osmo standalone --web-workers``
    sets it), else None: fit to the machine."""
    configured = os.environ.get("OSMO_WEB_WORKERS", "").strip()
    return int(configured) if configured.isdigit() and int(configured) > 0 else None


def metrics() -> bool:
    """``OSMO_METRICS`` (on by default): off records nothing and ``/metrics`` is 404."""
    return os.environ.get("OSMO_METRICS", "on").strip().lower() in TRUE


def kai_crds_dir() -> str:
    """``OSMO_KAI_CRDS_DIR`` ('' when unset)."""
    return os.environ.get(KAI_CRDS_DIR, "")


def credential_keys() -> str:
    """`OSMO_CREDENTIAL_KEYS` as set, for the standalone to keep a key when it is not."""
    return os.environ.get("OSMO_CREDENTIAL_KEYS", "")
