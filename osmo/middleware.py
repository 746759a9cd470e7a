"""Request path normalisation."""

from __future__ import annotations

import re

_SLASHES = re.compile(r"/{2,}")


class CollapseSlashesMiddleware:
    """Serves `//api/...` as `/api/...`: the OSMO client joins its base URL and an endpoint that
    may start with a slash (`url + "/" + "/api/pool_quota"`). Only runs of slashes are collapsed;
    the path is otherwise untouched."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "//" in request.path_info:
            request.path_info = _SLASHES.sub("/", request.path_info)
            request.path = _SLASHES.sub("/", request.path)
            request.META["PATH_INFO"] = request.path_info
        return self.get_response(request)
