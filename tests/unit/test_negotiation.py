"""The remembered content negotiation (osmo.negotiation) answers what DRF's own does, for the
same request asked twice (worked out, then remembered), and refuses what DRF refuses."""

from __future__ import annotations

import pytest
from django.http import Http404
from rest_framework import renderers
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from osmo import negotiation
from scheduler.api.views import YAMLRenderer

VIEWS = [
    [renderers.JSONRenderer, renderers.BrowsableAPIRenderer],
    [renderers.JSONRenderer, YAMLRenderer],
    [YAMLRenderer, renderers.JSONRenderer],
]
ACCEPTS = [None, "*/*", "application/json", "application/yaml", "text/html",
           "application/yaml;q=0.5, application/json", "text/*, application/*;q=0.2",
           "application/json; indent=4", "application/*"]
QUERIES = ["", "format=json", "format=yaml", "format=api"]


def request(accept: str | None, query: str) -> Request:
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    return Request(APIRequestFactory().get(f"/x?{query}", **headers))


def choose(negotiator, accept, query, renderer_classes):
    chosen = [renderer() for renderer in renderer_classes]
    try:
        renderer, media_type = negotiator.select_renderer(request(accept, query), chosen)
    except (NotAcceptable, Http404) as refused:  # 404: a format no renderer has
        return type(refused).__name__
    return type(renderer).__name__, media_type


@pytest.mark.parametrize("renderer_classes", VIEWS)
def test_the_remembered_choice_is_drfs_own(renderer_classes):
    negotiation._chosen.clear()
    remembering = negotiation.RememberingContentNegotiation()
    for accept in ACCEPTS:
        for query in QUERIES:
            expected = choose(DefaultContentNegotiation(), accept, query, renderer_classes)
            first = choose(remembering, accept, query, renderer_classes)
            again = choose(remembering, accept, query, renderer_classes)
            assert first == again == expected, (accept, query)
    assert 0 < len(negotiation._chosen) <= len(ACCEPTS) * len(QUERIES)


def test_refusals_are_drfs_own_and_not_remembered():
    negotiation._chosen.clear()
    remembering = negotiation.RememberingContentNegotiation()
    for _ in range(2):
        assert choose(remembering, "text/html", "", VIEWS[1]) == "NotAcceptable"
        assert choose(remembering, None, "format=api", VIEWS[1]) == "Http404"
    assert negotiation._chosen == {}


def test_many_distinct_headers_keep_the_memory_bounded():
    negotiation._chosen.clear()
    remembering = negotiation.RememberingContentNegotiation()
    for n in range(negotiation.MAX_REMEMBERED * 3):
        assert choose(remembering, f"application/json;v={n}", "", VIEWS[0]) == (
            "JSONRenderer", f"application/json;v={n}")
    assert len(negotiation._chosen) <= negotiation.MAX_REMEMBERED
