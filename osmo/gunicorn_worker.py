"""gunicorn's threaded worker, answering in the contract's `{code, detail}` shape the errors
gunicorn meets before the application runs: a request line over its limit (414), headers too
large (431), a request it cannot parse (400). gunicorn writes those as an HTML page."""

from __future__ import annotations

import json

from gunicorn import util
from gunicorn.workers import gthread

CODES = {400: "invalid_request", 403: "forbidden", 414: "uri_too_long",
         417: "expectation_failed", 431: "headers_too_large", 500: "server_error",
         501: "not_implemented"}
DETAILS = {
    414: "The request line is too long: shorten the path or the query string (repeat fewer "
         "parameters, or send them in a body).",
    431: "The request headers are too many or too large.",
    500: "Internal server error.",
}


def write_json_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn.util.write_error's job, with a JSON body."""
    detail = DETAILS.get(status_int) or (f"{reason}: {mesg}" if mesg else reason)
    body = json.dumps({"code": CODES.get(status_int, "invalid_request"),
                       "detail": detail}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    util.write_nonblock(sock, head.encode("latin1") + body)


class ThreadWorker(gthread.ThreadWorker):
    def init_process(self) -> None:
        # gunicorn's workers write their error pages through this module function.
        util.write_error = write_json_error
        super().init_process()
