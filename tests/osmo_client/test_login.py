"""`osmo login --method token`: the access-token exchange and the login tokens it hands out (a
replay written from the client's 6.4.0 source, not a recorded transcript — ``replay.py``)."""

from __future__ import annotations

import time

import jwt
import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from osmo.accounts import login_tokens
from osmo.accounts import services as accounts

from .replay import BASE_URL, OsmoClient, jwt_claims, login

pytestmark = pytest.mark.django_db


def whoami(token: str):
    client = APIClient()
    return client.get("/api/whoami", HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.fixture
def alice():
    user = accounts.user_ensure(username="alice", groups=["osmo-team-user"])
    return user, accounts.token_issue(user=user)


def test_exchange_returns_a_jwt_the_client_reads(alice):
    user, access_token = alice
    before = int(time.time())
    response = login(APIClient(), access_token)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"token", "expires_at"}
    assert len(body["token"].split(".")) == 3
    claims = jwt_claims(body["token"])  # the client's own decoding, no verification
    assert claims["name"] == "alice"
    assert claims["exp"] == body["expires_at"]
    assert before + 900 <= claims["exp"] <= int(time.time()) + 900


def test_login_token_carries_identity_and_roles(alice):
    _, access_token = alice
    client = OsmoClient(APIClient(), access_token)
    assert client.name == "alice"
    response = whoami(client.login_token)
    assert response.status_code == 200
    assert response.json()["user"] == "alice"
    assert response.json()["roles"] == ["osmo-team-user"]
    assert response.json()["pools"] == {}


@override_settings(OSMO_JWT_LIFETIME=60)
def test_lifetime_is_configurable(alice):
    _, access_token = alice
    body = login(APIClient(), access_token).json()
    assert body["expires_at"] - int(time.time()) in (59, 60)


def test_expired_login_token_is_401(alice):
    user, access_token = alice
    token_row = user.access_tokens.get()
    expired, _ = login_tokens.encode(user_id=user.pk, token_id=token_row.pk, username="alice",
                                     now=time.time() - 10_000)
    response = whoami(expired)
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


@pytest.mark.parametrize("forge", ["other_key", "none_alg", "tampered", "garbage"])
def test_forged_login_token_is_401(alice, forge):
    user, access_token = alice
    token_row = user.access_tokens.get()
    claims = {"iss": "osmo", "sub": str(user.pk), "tid": token_row.pk, "name": "alice",
              "iat": int(time.time()), "exp": int(time.time()) + 600}
    if forge == "other_key":
        token = jwt.encode(claims, "not-the-server-key-but-32-bytes-long!!", algorithm="HS256")
    elif forge == "none_alg":
        token = jwt.encode(claims, None, algorithm="none")
    elif forge == "tampered":
        good = login(APIClient(), access_token).json()["token"]
        header, _, signature = good.split(".")
        admin_claims = jwt.encode({**claims, "sub": "999999"}, "k" * 32, algorithm="HS256")
        token = ".".join([header, admin_claims.split(".")[1], signature])
    else:
        token = "a.b.c"
    response = whoami(token)
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_revoking_the_access_token_ends_its_login_tokens_at_once(alice):
    user, access_token = alice
    client = OsmoClient(APIClient(), access_token)
    assert whoami(client.login_token).status_code == 200
    accounts.tokens_revoke_all(user=user)
    response = whoami(client.login_token)
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    # ... and the client's re-exchange is refused too.
    response = login(APIClient(), access_token)
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_inactive_user_login_tokens_stop(alice):
    user, access_token = alice
    client = OsmoClient(APIClient(), access_token)
    user.is_active = False
    user.save(update_fields=["is_active"])
    assert whoami(client.login_token).status_code == 401


def test_roles_follow_the_user_not_the_token(alice):
    user, access_token = alice
    client = OsmoClient(APIClient(), access_token)
    accounts.user_ensure(username="alice", groups=["osmo-admin"])
    assert whoami(client.login_token).json()["roles"] == ["osmo-admin", "osmo-team-user"]


@pytest.mark.parametrize("body", [{}, {"token": ""}, {"token": 5}])
def test_exchange_body_is_validated(body):
    response = APIClient().post("/api/auth/jwt/access_token", body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"


@pytest.mark.parametrize("token", ["osmo_unknown", "a.b.c"])
def test_exchange_of_an_unknown_token_is_401(token):
    response = APIClient().post("/api/auth/jwt/access_token", {"token": token}, format="json")
    assert response.status_code == 401
    assert response.json() == {"code": "not_authenticated",
                               "detail": "Invalid or revoked access token."}


def test_a_login_token_cannot_be_exchanged_for_another(alice):
    _, access_token = alice
    login_token = login(APIClient(), access_token).json()["token"]
    assert login(APIClient(), login_token).status_code == 401


def test_double_slash_paths_are_served(alice):
    _, access_token = alice
    client = APIClient()
    response = client.get(f"{BASE_URL}//api/whoami",
                          HTTP_AUTHORIZATION=f"Bearer {access_token}")
    assert response.status_code == 200
    assert response.json()["user"] == "alice"
