"""The JSON request parser: bounded nesting and no NUL characters (Python's json module
recurses, and PostgreSQL cannot store U+0000 in text or jsonb)."""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from osmo.bounded import LimitExceeded, load_json

from .errors import OsmoError
from .limits import input_limits


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
        if "\\u0000" in text or "\x00" in text:
            raise OsmoError("invalid_request", "NUL characters are not allowed.",
                            errors={"body": ["Contains a NUL character."]})
        try:
            return load_json(text, input_limits())
        except LimitExceeded as exc:
            raise OsmoError(exc.code, f"The JSON body is {next(iter(exc.errors.values()))[0]}.",
                            errors=exc.errors) from exc
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
