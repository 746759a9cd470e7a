"""Assertions shared by the request-shape tests of each endpoint family."""

from __future__ import annotations


def refused(response, code: str, field: str) -> None:
    """A 400 with the contract's code and shape, whose `errors` (and detail) name `field`."""
    body = response.json()
    assert (response.status_code, body["code"]) == (400, code), body
    assert set(body) == {"code", "detail", "errors"}, body
    assert field in body["errors"], body["errors"]
    assert field == "non_field_errors" or field in body["detail"], body["detail"]
