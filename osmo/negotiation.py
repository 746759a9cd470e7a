"""DRF's content negotiation, its choice remembered. Which renderer and media type answer a
request depends only on its Accept header, the format it asks for and the view's renderer
classes, yet DRF parses the header and ranks its media types again at every request (a
thirtieth of a submission's CPU). A refusal (406, or 404 for an unknown format) is worked out
again each time, as DRF does."""

from __future__ import annotations

from rest_framework.negotiation import DefaultContentNegotiation

MAX_REMEMBERED = 256
_chosen: dict[tuple, tuple[int, str]] = {}


class RememberingContentNegotiation(DefaultContentNegotiation):
    def select_renderer(self, request, renderers, format_suffix=None):
        override = self.settings.URL_FORMAT_OVERRIDE
        key = (request.META.get("HTTP_ACCEPT"), format_suffix,
               request.query_params.get(override) if override else None,
               tuple(type(renderer) for renderer in renderers))
        chosen = _chosen.get(key)
        if chosen is None:
            renderer, media_type = super().select_renderer(request, renderers, format_suffix)
            chosen = (next(i for i, r in enumerate(renderers) if r is renderer), media_type)
            if len(_chosen) >= MAX_REMEMBERED:
                _chosen.clear()  # that many distinct headers are a caller's own
            _chosen[key] = chosen
        return renderers[chosen[0]], chosen[1]
