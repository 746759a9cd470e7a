"""Requests as NVIDIA's `osmo` client 6.4.0 sends them, and its way of reading answers.

What this is: a replay written by hand from the client's public source (``src/cli/*.py`` and
``src/lib/utils/client.py`` of NVIDIA/OSMO, version 6.4.0) — the method, path, query encoding,
headers and body shape each command builds there, and the fields it reads from the answer. No
test runs NVIDIA's client. ``transcripts/osmo-6.4.0.json`` holds what the real client sent for
34 commands (recorded by hand, against ``osmo standalone``); ``test_transcripts.py`` checks
that the replays send each of those requests (method, path, query keys, body keys). What the
client does with the answers is the replay's reading of its source, not recorded.

The client joins its base URL and an endpoint with a slash (`f"{url}/{endpoint}"`), so the one
endpoint it spells with a leading slash (`/api/pool_quota`) arrives as `//api/pool_quota`. Every
request carries `Content-Type: application/json`, `User-Agent: osmo-cli/6.4.0`, the client's
version header, and `Authorization: Bearer <login token>`; query parameters are encoded the way
`requests` does it (lists repeat the key, booleans become `True`/`False`). The token exchange
itself is a bare POST with only a JSON body and the user agent.
"""

from __future__ import annotations

import base64
import datetime
import json
import time
from urllib.parse import urlencode

BASE_URL = "http://testserver"
CLIENT_VERSION = "6.4.0"
USER_AGENT = f"osmo-cli/{CLIENT_VERSION}"
VERSION_HEADER = "x-osmo-client-version"
EXPIRE_WINDOW = 3  # seconds before `exp` at which the client exchanges its token again


# Every request the replays sent in this run, as (method, path, query, body) — compared with
# the recorded transcripts of the real client by test_transcripts.py.
SENT: list[tuple[str, str, str, object]] = []


def _query(params: dict | None) -> str:
    if not params:
        return ""
    pairs = []
    for key, value in params.items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if item is not None:
                pairs.append((key, str(item)))  # requests: str(True) == "True"
    return "?" + urlencode(pairs) if pairs else ""


def jwt_claims(token: str) -> dict:
    """`login.Jwt`: the middle part, base64url-decoded with padding added."""
    _, payload, _ = token.split(".")
    return json.loads(base64.urlsafe_b64decode(payload + "==").decode("utf-8"))


def token_expired(token: str) -> bool:
    return jwt_claims(token)["exp"] - EXPIRE_WINDOW < time.time()


def login(client, access_token: str):
    """`osmo login URL --method token --token PAT`: `os.path.join(url,
    'api/auth/jwt/access_token')`, json={'token': PAT}, only the user agent as header."""
    SENT.append(("POST", "/api/auth/jwt/access_token", "", {"token": access_token}))
    return client.generic("POST", f"{BASE_URL}/api/auth/jwt/access_token",
                          json.dumps({"token": access_token}),
                          content_type="application/json", HTTP_USER_AGENT=USER_AGENT)


class OsmoClient:
    """`ServiceClient.request` against the test server, logged in with an access token."""

    def __init__(self, api_client, access_token: str):
        self.api = api_client
        self.access_token = access_token
        response = login(api_client, access_token)
        assert response.status_code == 200, response.content
        self.login_token = response.json()["token"]
        self.name = jwt_claims(self.login_token)["name"]  # "Welcome {name}"

    def raw(self, method: str, endpoint: str, *, params: dict | None = None,
            payload=None, version_header: bool = True):
        if token_expired(self.login_token):  # `refresh_id_token` with an OSMO token
            response = login(self.api, self.access_token)
            assert response.status_code < 300, response.content
            self.login_token = response.json()["token"]
        headers = {"HTTP_AUTHORIZATION": f"Bearer {self.login_token}",
                   "HTTP_USER_AGENT": USER_AGENT}
        if version_header:
            headers[f"HTTP_{VERSION_HEADER.upper().replace('-', '_')}"] = CLIENT_VERSION
        body = "" if payload is None else json.dumps(payload)
        SENT.append((method, f"/{endpoint}", _query(params).removeprefix("?"), payload))
        return self.api.generic(method, f"{BASE_URL}/{endpoint}{_query(params)}", body,
                                content_type="application/json", **headers)

    def request(self, method: str, endpoint: str, **kwargs):
        """`handle_response`: 4xx/5xx raise, anything else is JSON."""
        response = self.raw(method, endpoint, **kwargs)
        assert response.status_code < 400, (response.status_code, response.content)
        return json.loads(response.content)


def user_zone_time(utc_time: str) -> str:
    """`common.convert_utc_datetime_to_user_zone`: the formats the client accepts."""
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"):
        try:
            parsed = datetime.datetime.strptime(utc_time.replace("T", " "), fmt)
            break
        except ValueError:
            continue
    else:
        raise AssertionError(f"the client cannot parse {utc_time!r}")
    return parsed.replace(tzinfo=datetime.UTC).strftime("%b %d, %Y %H:%M %Z")
