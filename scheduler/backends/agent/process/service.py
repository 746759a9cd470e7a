"""The agent's calls to the service: plain HTTPS requests that the agent makes (the cluster
needs no inbound connection), with the token of a user in ``osmo-backend-{name}``."""

from __future__ import annotations

import time
from urllib.parse import quote

import httpx

from .lease import Lease

CONNECT_SECONDS = 5.0
READ_SECONDS = 30.0


class Unreachable(Exception):
    """No useful answer (no connection, a timeout, 5xx, 429): try again after a backoff."""


class Refused(Exception):
    """A definite refusal (403, 409 identity mismatch, 4xx): the agent cannot go on."""

    def __init__(self, status: int, code: str, detail: str):
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code


class NotLeader(Refused):
    """409 ``agent_not_leader``: another agent leads the backend, or this one's lease ended;
    it stands by and registers again."""

    CODE = "agent_not_leader"


class Service:
    def __init__(self, url: str, token: str, name: str, instance: str):
        self.name = name
        self.instance = instance
        self.lease = Lease()
        base = f"{url.rstrip('/')}/api/configs/backend/{quote(name, safe='')}/agent/"
        self._client = httpx.Client(
            base_url=base, timeout=httpx.Timeout(READ_SECONDS + 35, connect=CONNECT_SECONDS),
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json",
                     "User-Agent": "osmo-backend-agent"})

    def close(self) -> None:
        self._client.close()

    def _post(self, path: str, body: dict) -> dict:
        sent = time.monotonic()
        try:
            response = self._client.post(path, json={**body, "instance": self.instance})
        except httpx.HTTPError as exc:
            raise Unreachable(f"{path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise Unreachable(f"{path}: {response.status_code}")
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        if response.status_code >= 400:
            code = str(answer.get("code", ""))
            detail = str(answer.get("detail", response.text[:300]))
            if code == NotLeader.CODE:
                self.lease.lost()
                raise NotLeader(response.status_code, code, detail)
            raise Refused(response.status_code, code, detail)
        self.lease.renewed(sent)  # the service renewed the lease when it took the request
        return answer

    def register(self, *, k8s_uid: str, version: str) -> dict:
        answer = self._post("register", {"k8s_uid": k8s_uid, "version": version})
        self.lease.configure(answer.get("lease_seconds") or self.lease.lease_seconds)
        return answer

    def send(self, messages: list[dict]) -> list[str]:
        return self._post("messages", {"messages": messages})["acked"]

    def poll(self, *, acks: list[dict], wait: float, following: list[str],
             usage: bool = False) -> dict:
        """``{work: [items], logs: [pods whose logs someone reads]}``, and ``usage`` (the
        queues' historical usage) when asked."""
        return self._post("work", {"acks": acks, "wait": wait, "following": following,
                                   **({"usage": True} if usage else {})})
