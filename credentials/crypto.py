"""Sealing credential payloads: Fernet tokens under the keys of `OSMO_CREDENTIAL_KEYS`.

The first key seals, every key opens (MultiFernet), so a rotation is: put a new key first,
keep the old ones after it, run `manage.py rotate_credentials` (every row sealed again under
the first key), then drop the old keys. docs/CREDENTIALS.md says it step by step.
"""

from __future__ import annotations

import json
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from osmo.errors import OsmoError


class CredentialKeysMissing(OsmoError):
    status_code = 503

    def __init__(self):
        super().__init__("credentials_unavailable",
                         "The credential store has no key: set OSMO_CREDENTIAL_KEYS.")


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key.encode("ascii")) for key in keys])


def _keys() -> MultiFernet:
    keys = tuple(settings.OSMO_CREDENTIAL_KEYS)
    if not keys:
        raise CredentialKeysMissing()
    return _fernet(keys)


def seal(payload: dict[str, str]) -> str:
    return _keys().encrypt(json.dumps(payload, sort_keys=True).encode("utf-8")).decode("ascii")


def open_sealed(sealed: str) -> dict[str, str]:
    """The payload; a token no configured key opens is an error that names no value."""
    try:
        return json.loads(_keys().decrypt(sealed.encode("ascii")))
    except InvalidToken:
        raise OsmoError("credentials_unavailable",
                        "A stored credential cannot be opened with the configured keys.",
                        status_code=503) from None


def reseal(sealed: str) -> str:
    """The same payload sealed under the first key (a rotation)."""
    return _keys().rotate(sealed.encode("ascii")).decode("ascii")


def new_key() -> str:
    return Fernet.generate_key().decode("ascii")
