"""Reference data from outside the repository: the real KAI CRDs, OSMO's example workflow
specs and the real kube-apiserver, in `../shared/` beside the checkout. Without it, the tests
that need it skip and say why; everything else runs. CI (`CI=true`) always has it, so there its
absence fails the run instead of quietly skipping a sixth of the suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
KAI_CRDS = SHARED / "reference" / "kai-crds"
OSMO_EXAMPLES = SHARED / "osmo-workflow-examples"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def missing(reason: str, *, module: bool = False) -> None:
    """Skip for `reason`; in CI, fail instead (at import too: a collection error)."""
    if in_ci():
        pytest.fail(f"{reason} — CI=true, where ../shared must be there", pytrace=False)
    pytest.skip(reason, allow_module_level=module)


def _require(path: Path, what: str, *, module: bool = False) -> Path:
    if not path.is_dir():
        missing(f"needs {what} in {path} (../shared beside the checkout; CI has it)",
                module=module)
    return path


def kai_crds(*, module: bool = False) -> Path:
    """The KAI CRD folder, or skip (the test, or the whole module at import)."""
    return _require(KAI_CRDS, "the KAI CRDs", module=module)


def osmo_examples(*, module: bool = False) -> Path:
    """OSMO's example workflow specs, or skip."""
    return _require(OSMO_EXAMPLES, "OSMO's example workflow specs", module=module)


def kai_schemas() -> dict:
    """The KAI CRD schemas (loaded once), or skip the test."""
    from scheduler.kai.crd_validation import load_crd_schemas

    return load_crd_schemas(kai_crds())


def example_paths() -> list:
    """Parameters over every example spec; one skipped parameter when they are absent."""
    if OSMO_EXAMPLES.is_dir():
        return sorted(OSMO_EXAMPLES.glob("*.yaml"))
    if in_ci():
        missing(f"needs OSMO's example workflow specs in {OSMO_EXAMPLES}")
    return [pytest.param(None, id="no-examples", marks=pytest.mark.skip(
        reason=f"needs OSMO's example workflow specs in {OSMO_EXAMPLES} (../shared; CI has it)"))]
