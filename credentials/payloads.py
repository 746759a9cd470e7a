"""The shapes of a credential's payload, by type (OSMO's `credential set` bodies), and the
rules their keys and values follow. Pure: no Django. No message here repeats a value."""

from __future__ import annotations

import re

from . import registry_scopes

NAME = re.compile(r"^[a-zA-Z]([a-zA-Z0-9_-]*[a-zA-Z0-9])?$")  # OSMO's CREDNAMEREGEX
NAME_MAX = 63
# A key becomes a Secret's data key, a mounted file's name: the API server's rule for both.
KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
MAX_KEYS = 64
MAX_VALUE_CHARS = 65536
MAX_PAYLOAD_CHARS = 512 * 1024  # a Secret holds at most 1 MiB, base64 grows it by a third

# body field → (type, required keys, optional keys); GENERIC takes any keys.
SHAPES = {
    "registry_credential": ("REGISTRY", ("auth",), ("registry", "username")),
    "data_credential": ("DATA", ("endpoint", "access_key_id", "access_key"),
                        ("region", "override_url", "addressing_style")),
    "generic_credential": ("GENERIC", (), ()),
}
TYPE_FIELD = {cred_type: field for field, (cred_type, _, _) in SHAPES.items()}
DOCKER_HUB = registry_scopes.DOCKER_HUB


def image_host(image: str) -> str:
    """The registry host an image reference pulls from, as the container runtime reads it
    (``registry_scopes.image_repository``)."""
    return registry_scopes.image_repository(image).host


def problems(field: str, body: object) -> tuple[str, dict[str, str], str, dict[str, list[str]]]:
    """(type, payload, profile, errors) of one typed body; errors name keys, never values."""
    cred_type, required, optional = SHAPES[field]
    errors: dict[str, list[str]] = {}
    if cred_type == "GENERIC":
        if not isinstance(body, dict) or set(body) != {"credential"}:
            return cred_type, {}, "", {field: ["must be {credential: {key: value, ...}}"]}
        body = body["credential"]
    if not isinstance(body, dict) or not body:
        return cred_type, {}, "", {field: ["must be an object of keys and text values"]}
    if len(body) > MAX_KEYS:
        return cred_type, {}, "", {field: [f"at most {MAX_KEYS} keys"]}
    payload: dict[str, str] = {}
    total = 0
    for key, value in body.items():
        where = f"{field}.{key}" if isinstance(key, str) and KEY.match(key) else field
        if not isinstance(key, str) or not KEY.match(key):
            errors.setdefault(field, []).append(
                "keys are 1 to 253 letters, digits, '-', '_' or '.'")
            continue
        if required or optional:
            if key not in required and key not in optional:
                errors.setdefault(where, []).append(f"unknown key for a {cred_type} credential")
                continue
        if not isinstance(value, str) or (not value and key in required):
            errors.setdefault(where, []).append("must be non-empty text")
            continue
        if len(value) > MAX_VALUE_CHARS:
            errors.setdefault(where, []).append(f"at most {MAX_VALUE_CHARS} characters")
            continue
        total += len(value)
        payload[key] = value
    for key in required:
        if key not in body:
            errors.setdefault(f"{field}.{key}", []).append("required")
    if total > MAX_PAYLOAD_CHARS:
        errors.setdefault(field, []).append(f"at most {MAX_PAYLOAD_CHARS} characters in all")
    profile = ""
    if cred_type == "REGISTRY":
        # Its scope: the host, and the repositories' path prefix when it names one.
        try:
            profile = str(registry_scopes.parse_scope(payload.get("registry", "")))
        except registry_scopes.ScopeError as exc:
            errors.setdefault(f"{field}.registry", []).append(str(exc))
    elif cred_type == "DATA":
        profile = payload.get("endpoint", "")
        if len(profile) > 1024:
            errors.setdefault(f"{field}.endpoint", []).append("at most 1024 characters")
    return cred_type, payload, profile, errors
