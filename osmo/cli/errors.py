"""Exit codes scripts can rely on, and the one error type the commands raise."""

from __future__ import annotations

EXIT_OK = 0
EXIT_API_ERROR = 1  # the API refused the request (a 4xx: not found, conflict, forbidden, ...)
EXIT_USAGE = 2  # bad arguments, an unreadable file, not logged in (argparse uses 2 too)
EXIT_UNAVAILABLE = 3  # the server cannot be reached, timed out, or failed (5xx)

EXIT_CODES_HELP = """exit codes:
  0  success
  1  the API refused the request (4xx); stderr has its detail and code
  2  usage error: bad arguments, unreadable file, not logged in
  3  the server cannot be reached, timed out or failed (5xx)"""


class CliError(Exception):
    """A failure reported as one line on stderr, with an exit code."""

    def __init__(self, message: str, exit_code: int, *, status: int | None = None,
                 code: str | None = None, body=None):
        super().__init__(message)
        self.exit_code = exit_code
        self.status = status
        self.code = code
        self.body = body


def usage_error(message: str) -> CliError:
    return CliError(message, EXIT_USAGE)
