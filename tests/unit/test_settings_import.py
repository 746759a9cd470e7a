"""Importing the settings starts nothing: the entry points start the embedded database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _import_settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if k not in {"DATABASE_URL", "SECRET_KEY", "OSMO_DEBUG"}}
    clean.update(OSMO_DATA_DIR=str(tmp_path / "data"), **env)
    return subprocess.run(
        [sys.executable, "-c", "import osmo.settings as s; print(s.DATABASES['default']['NAME'])"],
        cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60)


def test_without_a_database_url_the_import_fails_and_starts_nothing(tmp_path):
    result = _import_settings(tmp_path)
    assert result.returncode == 1
    assert "ImproperlyConfigured: DATABASE_URL is not set" in result.stderr
    assert not (tmp_path / "data").exists()  # no embedded PostgreSQL, no secret written


def test_with_a_database_url_the_import_only_reads_it(tmp_path):
    result = _import_settings(tmp_path, DATABASE_URL="postgresql://u@db.invalid:5432/osmo",
                              SECRET_KEY="k")
    assert (result.returncode, result.stdout.strip()) == (0, "osmo"), result.stderr
    assert not (tmp_path / "data").exists()


def test_a_missing_secret_key_fails_fast_outside_debug(tmp_path):
    result = _import_settings(tmp_path, DATABASE_URL="postgresql://u@db.invalid:5432/osmo")
    assert result.returncode == 1
    assert "SECRET_KEY must be set" in result.stderr
