"""Counting a module's spec parses, a store of parsed specs emptied around them."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

from osmo.text_keyed import TextKeyed


def counted_parses(monkeypatch, module: ModuleType, kept: TextKeyed) -> Iterator[list]:
    """For a fixture: the sources ``module.parse_workflow_spec`` was called with."""
    kept.clear()
    calls: list = []
    parse = module.parse_workflow_spec

    def counted(source, **options):
        calls.append(source)
        return parse(source, **options)

    monkeypatch.setattr(module, "parse_workflow_spec", counted)
    yield calls
    kept.clear()
