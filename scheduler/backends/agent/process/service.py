"""The agent's calls to the service: plain HTTPS requests that the agent makes (the cluster
needs no inbound connection), with the token of a user in ``osmo-backend-{name}``."""

from __future__ import annotations

from urllib.parse import quote

import httpx

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


class Service:
    def __init__(self, url: str, token: str, name: str):
        self.name = name
        base = f"{url.rstrip('/')}/api/configs/backend/{quote(name, safe='')}/agent/"
        self._client = httpx.Client(
            base_url=base, timeout=httpx.Timeout(READ_SECONDS + 35, connect=CONNECT_SECONDS),
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json",
                     "User-Agent": "osmo-backend-agent"})

    def close(self) -> None:
        self._client.close()

    def _post(self, path: str, body: dict) -> dict:
        try:
            response = self._client.post(path, json=body)
        except httpx.HTTPError as exc:
            raise Unreachable(f"{path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise Unreachable(f"{path}: {response.status_code}")
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        if response.status_code >= 400:
            raise Refused(response.status_code, str(answer.get("code", "")),
                          str(answer.get("detail", response.text[:300])))
        return answer

    def register(self, *, k8s_uid: str, version: str) -> dict:
        return self._post("register", {"k8s_uid": k8s_uid, "version": version})

    def send(self, messages: list[dict]) -> list[str]:
        return self._post("messages", {"messages": messages})["acked"]

    def poll(self, *, acks: list[dict], wait: float, following: list[str]) -> dict:
        """``{work: [items], logs: [pods whose logs someone reads]}``."""
        return self._post("work", {"acks": acks, "wait": wait, "following": following})
