"""Every ``OSMO_*`` knob of the server is read in one place: ``osmo/settings.py``, or — for the
few a bootstrap needs before settings exist — ``osmo/bootstrap.py``. The CLI (``osmo/cli/``) is
a program of its own and reads its own (``OSMO_URL``, ``OSMO_TOKEN``, ``OSMO_CONFIG``); so is the
backend agent, which runs without the server's settings and reads ``OSMO_AGENT_IDENTITY`` in its
entry point."""

from __future__ import annotations

import ast
from pathlib import Path

from osmo import bootstrap, capacity

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("osmo", "pools", "workflows", "scheduler", "dashboard")
ALLOWED = {"osmo/settings.py", "osmo/bootstrap.py", "scheduler/backends/agent/process/main.py"}
ALLOWED_UNDER = ("osmo/cli/",)


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ``."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


def _name(node: ast.AST, constants: dict[str, str]) -> str | None:
    """The variable's name an argument spells: a literal, an f-string's leading text, or a
    module-level constant."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def osmo_reads(source: str) -> list[tuple[int, str]]:
    """(line, name) for every read of an ``OSMO_*`` environment variable in ``source``."""
    tree = ast.parse(source)
    constants = {target.id: node.value.value for node in tree.body
                 if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                 and isinstance(node.value.value, str)
                 for target in node.targets if isinstance(target, ast.Name)}
    found = []
    for node in ast.walk(tree):
        argument = None
        if isinstance(node, ast.Call) and node.args:
            function = node.func
            if isinstance(function, ast.Attribute) and function.attr in ("get", "pop") \
                    and _is_environ(function.value):
                argument = node.args[0]
            elif (isinstance(function, ast.Attribute) and function.attr == "getenv") or (
                    isinstance(function, ast.Name) and function.id == "getenv"):
                argument = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                and _is_environ(node.value):
            argument = node.slice
        elif (isinstance(node, ast.Compare) and len(node.ops) == 1
              and isinstance(node.ops[0], ast.In | ast.NotIn)
              and _is_environ(node.comparators[0])):
            argument = node.left
        name = _name(argument, constants) if argument is not None else None
        if name and name.startswith("OSMO_"):
            found.append((node.lineno, name))
    return found


def test_osmo_knobs_are_read_in_settings_or_the_bootstrap_only():
    files = [ROOT / "manage.py"] + [path for package in PACKAGES
                                    for path in sorted((ROOT / package).rglob("*.py"))
                                    if "migrations" not in path.parts]
    found = {}
    for path in files:
        relative = path.relative_to(ROOT).as_posix()
        if relative in ALLOWED or relative.startswith(ALLOWED_UNDER):
            continue
        if reads := osmo_reads(path.read_text()):
            found[relative] = reads
    assert found == {}


def test_the_finder_sees_every_form_of_a_read():
    planted = (
        "import os\n"
        "from os import environ, getenv\n"
        'VARIABLE = "OSMO_FROM_A_CONSTANT"\n'
        'a = os.environ.get("OSMO_A", "")\n'
        'b = os.environ["OSMO_B"]\n'
        'c = os.getenv("OSMO_C")\n'
        'd = environ.get(f"OSMO_{name.upper()}")\n'
        'e = "OSMO_E" in os.environ\n'
        "f = getenv(VARIABLE)\n"
        'os.environ["OSMO_WRITTEN"] = "1"\n'  # a write for a child: not a read
        'g = os.environ.get("DATABASE_URL")\n')  # not a knob of ours
    assert osmo_reads(planted) == [(4, "OSMO_A"), (5, "OSMO_B"), (6, "OSMO_C"), (7, "OSMO_"),
                                   (8, "OSMO_E"), (9, "OSMO_FROM_A_CONSTANT")]


def test_the_bootstrap_reads_when_asked(monkeypatch):
    monkeypatch.setenv("OSMO_WEB_WORKERS", "6")
    monkeypatch.setenv("OSMO_METRICS", "off")
    assert (bootstrap.web_workers(), capacity.web_workers(), bootstrap.metrics()) == (6, 6, False)
    monkeypatch.setenv("OSMO_WEB_WORKERS", "0")
    monkeypatch.delenv("OSMO_METRICS")
    assert (bootstrap.web_workers(), bootstrap.metrics()) == (None, True)
