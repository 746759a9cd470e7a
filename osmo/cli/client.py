"""A thin HTTP client for the REST API: every failure becomes a one-line CliError."""

from __future__ import annotations

from urllib.parse import quote

import httpx

from .errors import EXIT_API_ERROR, EXIT_UNAVAILABLE, CliError

TIMEOUT_SECONDS = 30.0


def segment(value: str) -> str:
    """A path segment, escaped (names never hold '/', but a typo must not change the route)."""
    return quote(value, safe="")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class Api:
    def __init__(self, url: str, token: str, *, timeout: float = TIMEOUT_SECONDS):
        self.url = url.rstrip("/")
        # base_url keeps a path prefix (a server behind https://host/osmo/ works too).
        self._client = httpx.Client(
            base_url=self.url + "/", timeout=timeout,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json",
                     "User-Agent": "osmo-cli"})

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def request(self, method: str, path: str, *, params=None, json=None) -> tuple[int, object]:
        """(status, parsed JSON body) of a 2xx answer; raises CliError otherwise."""
        try:
            response = self._client.request(method, path.lstrip("/"), params=params, json=json)
        except httpx.TimeoutException as error:
            raise CliError(f"{self.url} did not answer within {self._client.timeout.read:g}s",
                           EXIT_UNAVAILABLE) from error
        except httpx.HTTPError as error:
            raise CliError(f"cannot reach {self.url}: {_one_line(error) or type(error).__name__}",
                           EXIT_UNAVAILABLE) from error
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = None
        if response.is_success:
            if body is None and response.status_code != 204:
                raise CliError(f"{self.url} answered {response.status_code} without JSON: is it "
                               f"an OSMO server?", EXIT_UNAVAILABLE, status=response.status_code)
            return response.status_code, body
        self._raise(response, body)

    def _raise(self, response, body=None):
        if body is None:
            try:
                body = response.json() if response.content else None
            except ValueError:
                body = None
        code = body.get("code") if isinstance(body, dict) else None
        detail = body.get("detail") if isinstance(body, dict) else None
        detail = _one_line(detail or f"HTTP {response.status_code} {response.reason_phrase}")
        message = f"{detail} ({code})" if code else detail
        if response.status_code >= 500:
            raise CliError(f"server error: {message}", EXIT_UNAVAILABLE,
                           status=response.status_code, code=code, body=body)
        if response.status_code == 401:
            message += "; log in again with `osmo login`"
        raise CliError(message, EXIT_API_ERROR, status=response.status_code, code=code,
                       body=body)

    def stream(self, path: str, **params):
        """The lines of a plain-text answer as they arrive (a followed log waits as long as
        the server keeps it open: the server bounds it); raises CliError like `request`."""
        params = {k: v for k, v in params.items() if v not in (None, [], "")}
        try:
            with self._client.stream("GET", path.lstrip("/"), params=params,
                                     timeout=httpx.Timeout(TIMEOUT_SECONDS, read=None)
                                     ) as response:
                if not response.is_success:
                    response.read()
                    self._raise(response)
                yield from response.iter_lines()
        except httpx.HTTPError as error:
            raise CliError(f"the stream from {self.url} broke: "
                           f"{_one_line(error) or type(error).__name__}; run the command "
                           f"again to go on", EXIT_UNAVAILABLE) from error

    def get(self, path: str, **params):
        return self.request("GET", path, params={k: v for k, v in params.items()
                                                 if v not in (None, [], "")})[1]
