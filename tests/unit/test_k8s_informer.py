"""The informer's cache semantics without a server: a LIST replaces the cache and sets the
resourceVersion; events replace and remove objects; a 410 Gone forgets the version so that the
next step LISTs again (and objects deleted meanwhile disappear)."""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException

from scheduler.backends.kubernetes.informer import JOURNAL_SLACK, Informer


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


def test_the_first_list_is_served_from_the_watch_cache_and_a_relist_reads_through() -> None:
    """The first LIST asks for resourceVersion "0" (any version the API server's watch cache
    holds, as client-go's reflector starts); a later one sets none, so the cache never goes
    back behind the events a watch already showed."""
    asked = []

    def lister(**kwargs):
        asked.append(kwargs.get("resource_version"))
        return Response({"items": [obj("a")], "metadata": {"resourceVersion": "10"}})

    informer = Informer("pods", lister)
    informer.relist()
    informer.relist()
    assert asked == ["0", None]


class Stream:
    """A watch response: the given lines, then the end of the stream."""

    status = 200

    def __init__(self, *lines: str):
        self.body = "".join(line + "\n" for line in lines).encode()

    def stream(self, amt=None, decode_content=False):
        yield self.body

    def close(self):
        pass

    def release_conn(self):
        pass


def test_a_watch_line_that_is_not_an_event_is_skipped() -> None:
    """A blank or undecodable line (a stream cut short) is no event: the watch goes on with
    the next line instead of ending the informer's thread."""
    informer = Informer("pods", lambda **kw: Stream(
        json.dumps({"type": "ADDED", "object": obj("a", "2")}), "", "{\"type\": \"MODI",
        json.dumps({"type": "ADDED", "object": obj("b", "3")})))
    informer.resource_version = "1"
    assert informer.watch_once() == 2
    assert sorted(o["metadata"]["name"] for o in informer.items()) == ["a", "b"]
    assert informer.resource_version == "3"


def test_an_unexpected_error_costs_a_relist_not_the_informer() -> None:
    """An error that is not the API server's (a bug, an object the cache cannot take) must not
    end the informer's thread — the scheduler would go on with a cache that never changes
    again: it LISTs afresh and goes on watching."""
    listing = {"items": [obj("a")], "metadata": {"resourceVersion": "10"}}
    informer = Informer("pods", lambda **kw: Response(listing))
    informer.step()
    calls = []

    def broken(*_args, **_kwargs):
        calls.append("watch")
        if len(calls) == 1:
            listing["items"] = [obj("b", "20")]  # what changed while the watch broke
            raise KeyError("metadata")
        informer.stop()
        return 0

    informer.watch_once = broken
    informer.run(lambda: True, backoff_start=0.0)
    assert calls == ["watch", "watch"]
    assert [o["metadata"]["name"] for o in informer.items()] == ["b"]


def test_the_journal_names_each_change_since_a_reader_s_cursor() -> None:
    """A reader's first call and any call after a re-list read everything; between them it
    gets each changed key with its object now (None: deleted), once per call."""
    listing = {"items": [obj("a"), obj("b")], "metadata": {"resourceVersion": "10"}}
    informer = Informer("pods", lambda **kw: Response(listing))
    informer.relist()
    cursor, changed = informer.changes(None)
    assert changed is None
    cursor, changed = informer.changes(cursor)
    assert changed == {}
    informer.apply("MODIFIED", obj("a", "11"))
    informer.apply("ADDED", obj("c", "12"))
    informer.apply("DELETED", obj("b", "13"))
    cursor, changed = informer.changes(cursor)
    assert changed == {"ns/a": obj("a", "11"), "ns/c": obj("c", "12"), "ns/b": None}
    assert informer.changes(cursor)[1] == {}
    informer.relist()  # the LIST may miss deletions' events: read it all again
    cursor, changed = informer.changes(cursor)
    assert changed is None and informer.changes(cursor)[1] == {}


def test_a_journal_longer_than_twice_its_objects_starts_again() -> None:
    informer = Informer("pods", lambda **kw: None)
    cursor, _ = informer.changes(None)
    for i in range(2 * 1 + JOURNAL_SLACK + 1):  # one object
        informer.apply("MODIFIED", obj("a", str(i)))
    assert informer.changes(cursor)[1] is None  # forgotten: the reader reads it all
    cursor, _ = informer.changes(None)
    informer.apply("MODIFIED", obj("a", "x"))
    assert informer.changes(cursor)[1] == {"ns/a": obj("a", "x")}
