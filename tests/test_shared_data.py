"""Without `../shared` beside the checkout, the tests that need it skip and say why; in CI
(`CI=true`), where it is always laid, its absence fails the run instead. Both are checked on a
copy of the checkout that has no `../shared` beside it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("osmo", "pools", "credentials", "workflows", "workflow_apps", "scheduler", "dashboard",
         "migrations", "templates", "tests", "manage.py", "pyproject.toml")
# One module that reads OSMO's examples at import, and the real-API-server tier.
NEEDS_SHARED = ("tests/unit/workflow_spec/test_templating.py", "tests/kube_real/test_needs_it.py")


@pytest.fixture(scope="module")
def lone_checkout(tmp_path_factory) -> Path:
    checkout = tmp_path_factory.mktemp("alone") / "checkout"
    checkout.mkdir()
    for part in PARTS:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, checkout / part,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(source, checkout / part)
    (checkout / NEEDS_SHARED[1]).write_text("def test_it(apiserver):\n    pass\n")
    assert not (checkout.parent / "shared").exists()
    return checkout


def _pytest(checkout: Path, ci: str | None, *paths: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in {"CI", "DATABASE_URL", "REDIS_URL", "OSMO_DATA_DIR"}}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           *paths], cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=240)


def test_a_plain_clone_skips_with_the_reason(lone_checkout):
    run = _pytest(lone_checkout, None, *NEEDS_SHARED)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "2 skipped" in run.stdout
    assert "needs OSMO's example workflow specs in" in run.stdout
    assert "no kube-apiserver binary at" in run.stdout


@pytest.mark.parametrize("path", NEEDS_SHARED)
def test_ci_fails_without_shared(lone_checkout, path):
    run = _pytest(lone_checkout, "true", path)
    assert run.returncode != 0, run.stdout[-3000:]
    assert "CI=true, where ../shared must be there" in run.stdout, run.stdout[-3000:]
    assert "skipped" not in run.stdout
