"""Messages waiting for the service's ack, in the order they were made.

Ids are this process's random prefix and a counter: unique across the agent's restarts
without anything kept on disk (the service de-duplicates by id).

A message of a kind put with ``put_latest`` (a state) replaces those of its kind not sent yet,
folding them in when asked (``merge``: a cycle's tally of metrics). One in a batch whose answer
has not come stays as it is: the service may have applied it, and sent again under its id it
is applied at most once, where folded into the next it would count twice. So that such kept
messages do not pile up while the service is unreachable, a batch carries one message of each
such kind at most: the newer waits for the older's ack, taking in the cycles meanwhile."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from itertools import count

import orjson

MAX_BATCH_MESSAGES = 200
MAX_BATCH_BYTES = 1024 * 1024  # the service takes 4 MiB a request; a pods message is ~400 KiB


class Outbox:
    def __init__(self) -> None:
        self._prefix = secrets.token_hex(8)
        self._numbers = count(1)
        self._messages: list[tuple[dict, int]] = []  # (message, encoded size)
        self._sent: set[str] = set()  # ids in a batch whose answer never came: maybe applied
        self._batch: set[str] = set()  # ids of the last batch
        self._latest_kinds: set[str] = set()
        self._lock = threading.Lock()
        self.ready = threading.Event()

    def put(self, kind: str, payload: dict) -> str:
        with self._lock:
            return self._append(kind, payload)

    def put_latest(self, kind: str, payload: dict,
                   merge: Callable[[dict, dict], dict] | None = None) -> str:
        """A message that replaces the unacked ones of its kind (a state, not an event: only
        the latest matters) but one in a batch with no answer yet, in the place of the oldest
        it replaces (still before what was made after it: the service reads a first bind's
        workflow as not started yet); ``merge(replaced, payload)``: the payload that keeps what
        a replaced one carried."""
        with self._lock:
            self._latest_kinds.add(kind)
            kept, position = [], None
            for message, length in self._messages:
                if message["type"] != kind or message["id"] in self._sent:
                    kept.append((message, length))
                    continue
                position = len(kept) if position is None else position
                if merge is not None:
                    payload = merge(message["payload"], payload)
            self._messages = kept
            return self._append(kind, payload, position)

    def _append(self, kind: str, payload: dict, position: int | None = None) -> str:
        message = {"id": f"{self._prefix}-{next(self._numbers)}", "type": kind,
                   "payload": payload}
        entry = (message, len(orjson.dumps(message)))
        if position is None:
            self._messages.append(entry)
        else:
            self._messages.insert(position, entry)
        self.ready.set()
        return message["id"]

    def batch(self) -> list[dict]:
        """The oldest unacked messages, up to a batch's count and bytes (one at least)."""
        out, size, latest = [], 0, set()
        with self._lock:
            for message, length in self._messages[:MAX_BATCH_MESSAGES]:
                if out and size + length > MAX_BATCH_BYTES or message["type"] in latest:
                    break
                if message["type"] in self._latest_kinds:
                    latest.add(message["type"])
                out.append(message)
                size += length
            self._batch = {message["id"] for message in out}
            self._sent |= self._batch
            if not out:
                self.ready.clear()
        return out

    def acked(self, ids: list[str]) -> None:
        """The service answered the last batch: these were applied (now or before); the rest
        of it was not (the service stopped at one that failed, its transaction rolled back)."""
        done = set(ids)
        with self._lock:
            self._messages = [(m, n) for m, n in self._messages if m["id"] not in done]
            self._sent -= self._batch | done
            if not self._messages:
                self.ready.clear()

    def clear(self) -> None:
        """Drop every unacked message: another agent leads and reports this cluster (this one
        re-lists everything when it leads again)."""
        with self._lock:
            self._messages = []
            self._sent.clear()
            self.ready.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._messages)
