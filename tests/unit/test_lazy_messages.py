"""Django's messages made only when used (osmo.middleware.LazyMessageMiddleware): a request that
never touches them builds no storage and sets no cookie; one that adds, reads or keeps them gets
exactly the cookies Django's own MessageMiddleware sets."""

from __future__ import annotations

import pytest
from django.contrib import messages
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.messages.storage.fallback import FallbackStorage
from django.http import HttpResponse
from django.test import RequestFactory
from django.utils.functional import empty

from osmo.middleware import LazyMessageMiddleware


def untouched(request):
    return HttpResponse("ok")


def adds(request):
    messages.success(request, "Subpool a created with 4 GPUs.")
    messages.error(request, "Another one.")
    return HttpResponse("ok")


def reads(request):
    return HttpResponse(" | ".join(str(m) for m in messages.get_messages(request)))


def keeps(request):
    # iterated but told to keep them (the storage is used, then not marked used)
    storage = messages.get_messages(request)
    text = " | ".join(str(m) for m in storage)
    storage.used = False
    return HttpResponse(text)


def serve(middleware_class, view, cookies=None):
    request = RequestFactory().get("/")
    request.COOKIES.update(cookies or {})
    request.session = {}  # the fallback's second storage (a dict does for these few messages)
    response = middleware_class(view)(request)
    return request, response


def test_an_untouched_request_builds_no_storage_and_sets_no_cookie():
    request, response = serve(LazyMessageMiddleware, untouched)
    assert request._messages._wrapped is empty
    assert response.cookies == {}
    assert serve(MessageMiddleware, untouched)[1].cookies == {}


@pytest.mark.parametrize("view", [adds, reads, keeps])
@pytest.mark.parametrize("earlier", [False, True])
def test_used_messages_set_the_cookies_django_sets(view, earlier):
    cookies = {}
    if earlier:  # a message left by an earlier request
        cookies = {key: morsel.value for key, morsel in
                   serve(MessageMiddleware, adds)[1].cookies.items()}
        assert "messages" in cookies
    lazy_request, lazy = serve(LazyMessageMiddleware, view, cookies)
    _, own = serve(MessageMiddleware, view, cookies)
    assert isinstance(lazy_request._messages._wrapped, FallbackStorage)
    assert lazy.content == own.content
    assert {key: (morsel.value, morsel["max-age"]) for key, morsel in lazy.cookies.items()} == {
        key: (morsel.value, morsel["max-age"]) for key, morsel in own.cookies.items()}
    if view is adds:
        assert "messages" in lazy.cookies and lazy.cookies["messages"].value
    if view is reads and earlier:
        assert lazy.content == b"Subpool a created with 4 GPUs. | Another one."
        assert lazy.cookies["messages"].value == ""  # read: deleted, as Django does


def test_a_view_that_replaces_the_storage_is_served_as_django_serves_it():
    def replaces(request):
        request._messages = FallbackStorage(request)
        messages.info(request, "Replaced.")
        return HttpResponse("ok")

    _, lazy = serve(LazyMessageMiddleware, replaces)
    _, own = serve(MessageMiddleware, replaces)
    assert lazy.cookies["messages"].value == own.cookies["messages"].value != ""
