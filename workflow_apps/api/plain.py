"""Text bodies of the app endpoints: a spec or a name sent as plain text."""

from __future__ import annotations

from rest_framework.parsers import BaseParser


class PlainTextParser(BaseParser):
    media_type = "text/plain"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read().decode("utf-8", errors="replace")
