"""The apps depend in one direction: osmo ← pools ← credentials ← workflows ←
workflow_apps ← scheduler ← dashboard. An app
imports only the apps to its left, at module level or inside a function; pure packages under
`scheduler/core` may be imported from anywhere; only the entry points that wire the apps
together import every app. A lower app that must make a higher one act publishes an event
(`osmo/events.py`); one that must read what a higher one owns declares a port (`osmo/ports.py`).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ORDER = {"osmo": 0, "pools": 1, "credentials": 2, "workflows": 3, "workflow_apps": 4,
         "scheduler": 5, "dashboard": 6}
PURE = ("scheduler.core",)  # importable from anywhere: no Django, no app
ENTRY_POINTS = {"osmo/urls.py", "osmo/standalone.py", "osmo/celery.py", "osmo/settings.py",
                "osmo/wsgi.py", "osmo/asgi.py", "manage.py"}


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The modules an import statement names, relative ones resolved against ``module``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if not node.level:
        base = node.module or ""
    else:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join(package[:len(package) - node.level + 1]
                        + ([node.module] if node.module else []))
    return [f"{base}.{alias.name}" for alias in node.names] if not node.module else [base]


def upward_imports(source: str, path: str) -> list[tuple[int, str]]:
    """(line, imported module) for every import in ``source`` (the file at ``path``, relative
    to the repository) that runs against the direction."""
    parts = Path(path).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    module = ".".join(parts[:-1] if is_package else parts)
    level = ORDER.get(parts[0])
    found = []
    for node in ast.walk(ast.parse(source)):
        for name in _imported(node, module, is_package):
            top = name.split(".")[0]
            if top in ORDER and ORDER[top] > level and not name.startswith(PURE):
                found.append((node.lineno, name))
    return found


def product_files() -> list[Path]:
    return [path for app in ORDER for path in sorted((ROOT / app).rglob("*.py"))
            if "migrations" not in path.parts
            and str(path.relative_to(ROOT)) not in ENTRY_POINTS]


def test_no_app_imports_a_higher_one():
    found = {str(path.relative_to(ROOT)): lines for path in product_files()
             if (lines := upward_imports(path.read_text(), str(path.relative_to(ROOT))))}
    assert found == {}


def test_every_app_is_checked():
    files = {str(path.relative_to(ROOT)) for path in product_files()}
    assert {"osmo/health.py", "pools/services.py", "workflows/lifecycle.py",
            "scheduler/services.py", "dashboard/views.py"} <= files
    assert "osmo/urls.py" not in files


def test_a_planted_upward_import_is_caught():
    planted = (
        "from scheduler.backends import cluster_changed\n"  # module level
        "import workflows.selectors\n"
        "from scheduler.core.kai_names import POOL_LABEL\n"  # pure: allowed
        "from osmo.errors import OsmoError\n"  # lower: allowed
        "from . import quota\n"  # its own app: allowed
        "def usage():\n"
        "    from workflows.models import Task\n"  # inside a function
        "    from .. import node_sets\n"  # relative, in the app: allowed
        "    return Task\n")
    assert upward_imports(planted, "pools/api/views.py") == [
        (1, "scheduler.backends"), (2, "workflows.selectors"), (7, "workflows.models")]
    assert upward_imports("from dashboard import views\n", "scheduler/loop.py") == [
        (1, "dashboard")]
    assert upward_imports("from workflows.spec import parse_workflow_spec\n",
                          "scheduler/snapshot.py") == []
