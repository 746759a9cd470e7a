"""The informer's cache semantics without a server: a LIST replaces the cache and sets the
resourceVersion; events replace and remove objects; a 410 Gone forgets the version so that the
next step LISTs again (and objects deleted meanwhile disappear)."""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException

from scheduler.backends.kubernetes.informer import Informer


class Response:
    def __init__(self, body):
        self.data = json.dumps(body).encode()

    def release_conn(self):
        pass


def obj(name, rv="1"):
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


def test_list_events_and_a_410_relist() -> None:
    listing = {"items": [obj("a"), obj("b")], "metadata": {"resourceVersion": "10"}}
    changes = []
    informer = Informer("pods", lambda **kw: Response(listing),
                        on_change=lambda *event: changes.append(event[:2]))
    assert informer.step() == 2  # the first step LISTs
    assert informer.resource_version == "10" and informer.synced.is_set()
    assert sorted(o["metadata"]["name"] for o in informer.items()) == ["a", "b"]
    informer.apply("MODIFIED", obj("a", "11"))
    informer.apply("DELETED", obj("b", "12"))
    assert [o["metadata"]["resourceVersion"] for o in informer.items()] == ["11"]
    assert informer.get("ns/a")["metadata"]["resourceVersion"] == "11"

    def gone(*_args, **_kwargs):
        raise ApiException(status=410, reason="Gone")

    informer.watch_once = gone
    assert informer.step() == 0 and informer.resource_version is None
    listing = {"items": [obj("c", "20")], "metadata": {"resourceVersion": "20"}}
    informer.lister = lambda **kw: Response(listing)
    informer.step()
    assert [o["metadata"]["name"] for o in informer.items()] == ["c"]
    assert ("pods", "LIST") in changes and ("pods", "DELETED") in changes
