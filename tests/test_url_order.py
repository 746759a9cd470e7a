"""The API's includes are tried in an order chosen for speed (the workflow routes first):
that is only sound while no path matches routes of two includes, which this checks for every
route against sample paths made of every literal segment the API's routes use."""

from __future__ import annotations

import itertools
import re

from django.urls import URLPattern, URLResolver, get_resolver


def _api_routes() -> dict[str, list[URLPattern]]:
    """The API's leaf routes by the include (module) they come from."""
    api = next(p for p in get_resolver().url_patterns
               if isinstance(p, URLResolver) and str(p.pattern) == "api/")
    routes: dict[str, list[URLPattern]] = {}
    for entry in api.url_patterns:
        if isinstance(entry, URLResolver):
            routes[entry.urlconf_name.__name__] = list(entry.url_patterns)
        else:
            routes.setdefault("osmo.urls", []).append(entry)
    return routes


def _samples(route: str, words: list[str]) -> list[str]:
    parts = re.split(r"<(?:(\w+):)?\w+>", route)
    converters = parts[1::2]
    choices = [["7", "x", *words] if kind in (None, "str", "slug", "path") else ["7"]
               for kind in converters]
    samples = []
    for values in itertools.product(*choices):
        text = parts[0]
        for value, literal in zip(values, parts[2::2], strict=True):
            text += value + literal
        samples.append(text)
    return samples


def test_no_path_matches_routes_of_two_includes() -> None:
    routes = _api_routes()
    assert list(routes)[:2] == ["osmo.urls", "workflows.api.urls"]  # the order this guards
    words = sorted({w for patterns in routes.values() for p in patterns
                    for w in re.split(r"[/<>]", str(p.pattern)) if w and ":" not in w})
    checked = 0
    for module, patterns in routes.items():
        for pattern in patterns:
            for sample in _samples(str(pattern.pattern), words):
                owners = {other for other, others in routes.items()
                          if any(o.pattern.match(sample) for o in others)}
                assert owners == {module}, (sample, owners)
                checked += 1
    assert checked > 100
