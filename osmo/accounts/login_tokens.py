"""Short-lived signed login tokens (JWT, HS256) exchanged for a personal access token.

The OSMO client logs in with `--method token`: it posts its access token to
`/api/auth/jwt/access_token`, keeps the JWT it gets back and sends it as `Authorization: Bearer`
until it expires, then exchanges the access token again. A login token names the access token
it came from (`tid`): it authenticates only while that access token is unrevoked and its user
active, so revoking the access token ends its login tokens at once.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

import jwt
from django.conf import settings

ALGORITHM = "HS256"
ISSUER = "osmo"


@dataclass(frozen=True)
class LoginClaims:
    user_id: int
    token_id: int
    username: str
    expires_at: int


class InvalidLoginToken(Exception):
    """Expired, forged, malformed or issued for another service."""


def _key() -> bytes:
    # A key of its own for this purpose, 32 bytes whatever the configured secret's length.
    return hmac.new(settings.OSMO_JWT_SIGNING_KEY.encode(), b"osmo-login-token",
                    hashlib.sha256).digest()


def looks_like_jwt(raw: str) -> bool:
    return raw.count(".") == 2


def encode(*, user_id: int, token_id: int, username: str, now: float | None = None
           ) -> tuple[str, int]:
    """(the signed token, its expiry as epoch seconds)."""
    issued_at = int(time.time() if now is None else now)
    expires_at = issued_at + settings.OSMO_JWT_LIFETIME
    claims = {"iss": ISSUER, "sub": str(user_id), "tid": token_id, "name": username,
              "iat": issued_at, "exp": expires_at}
    return jwt.encode(claims, _key(), algorithm=ALGORITHM), expires_at


def decode(raw: str) -> LoginClaims:
    try:
        claims = jwt.decode(raw, _key(), algorithms=[ALGORITHM],
                            issuer=ISSUER, options={"require": ["exp", "iat", "sub", "tid"]})
        return LoginClaims(user_id=int(claims["sub"]), token_id=int(claims["tid"]),
                           username=str(claims.get("name", "")), expires_at=int(claims["exp"]))
    except (jwt.PyJWTError, TypeError, ValueError) as error:
        raise InvalidLoginToken(str(error)) from error
