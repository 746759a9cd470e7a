"""`/api/credentials` in OSMO's shapes (docs/CREDENTIALS.md): the caller's own credentials
only; no answer carries a value."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.errors import OsmoError

from .. import payloads, selectors, services


def entry(credential) -> dict:
    return {"cred_name": credential.name, "cred_type": credential.cred_type,
            "profile": credential.profile or None, "keys": list(credential.keys)}


def _name(name: str) -> str:
    if len(name) > payloads.NAME_MAX or not payloads.NAME.match(name):
        raise OsmoError("invalid_name",
                        "A credential name is a letter, then letters, digits, '-' or '_', "
                        f"ending in a letter or a digit, at most {payloads.NAME_MAX} characters.",
                        errors={"name": ["not a credential name"]})
    return name


def _typed_body(data: object) -> tuple[str, dict[str, str], str]:
    if not isinstance(data, dict):
        raise OsmoError("invalid_request", "Send one of: "
                        + ", ".join(payloads.SHAPES) + ".", errors={"body": ["an object"]})
    given = [key for key, value in data.items() if value is not None]
    unknown = [key for key in given if key not in payloads.SHAPES]
    if unknown or len(given) != 1:
        raise OsmoError(
            "invalid_request",
            "Exactly one of " + ", ".join(payloads.SHAPES) + " must be set "
            "(the types are REGISTRY, DATA and GENERIC).",
            errors={str(key)[:64]: ["unknown credential type"] for key in unknown[:8]}
            or {"body": ["exactly one credential type"]})
    cred_type, payload, profile, errors = payloads.problems(given[0], data[given[0]])
    if errors:
        raise OsmoError("invalid_request", f"The {cred_type} credential is not valid: "
                        + "; ".join(f"{path}: {m[0]}" for path, m in list(errors.items())[:3]),
                        errors=errors)
    return cred_type, payload, profile


class CredentialListView(APIView):
    @extend_schema(responses=dict, summary="Your credentials: names, types, profiles, keys")
    def get(self, request):
        return Response({"credentials": [entry(c) for c in
                                         selectors.credentials_of(user=request.user)]})


class CredentialDetailView(APIView):
    @extend_schema(request=dict, responses=dict,
                   summary="Set (create or replace) one of your credentials; its values are "
                           "never returned")
    def post(self, request, name: str):
        cred_type, payload, profile = _typed_body(request.data)
        credential = services.credential_set(actor=request.user, name=_name(name),
                                             cred_type=cred_type, payload=payload,
                                             profile=profile)
        return Response(entry(credential))

    @extend_schema(request=None, responses=dict, summary="Delete one of your credentials")
    def delete(self, request, name: str):
        credential = services.credential_delete(actor=request.user, name=_name(name))
        return Response({"credentials": [entry(credential)]})
