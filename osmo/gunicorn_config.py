"""Settings of every gunicorn the product starts: `gunicorn -c python:osmo.gunicorn_config ...`.

- The control socket (gunicorn's `gunicornc` interface) lives in the data folder: gunicorn's
  default, `~/.gunicorn/gunicorn.ctl`, is one path for every gunicorn of a user, so two
  standalones (or a standalone and the test suite) would take it from each other. A data folder
  too deep for a Unix socket path turns it off.
- The worker answers the errors gunicorn meets before the application runs in the contract's
  JSON shape, and new connections go to the worker holding the fewest (osmo.gunicorn_worker):
  the master frees a worker's slot when it exits.
- Workers and threads fit the machine (osmo.capacity); `--workers` / `--threads` override them.
- The application is imported once, in the master, before the workers fork: a restarted web
  (or a replaced worker) serves after one import of Django and the product instead of one per
  worker competing for the same cores (2.4-3 s instead of 4.3-8.8 s back after a kill -9 on a
  loaded 2-core machine).
"""

from osmo import gunicorn_worker, process_gc
from osmo.capacity import WEB_THREADS, web_workers
from osmo.embedded import data_dir

UNIX_SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes, the last a NUL

_control_socket = str(data_dir() / "gunicorn.ctl")
if len(_control_socket.encode()) <= UNIX_SOCKET_PATH_MAX:
    control_socket = _control_socket
else:
    control_socket_disable = True
worker_class = "osmo.gunicorn_worker.ThreadWorker"
workers = web_workers()
threads = WEB_THREADS
preload_app = True


def when_ready(server) -> None:
    """In the master, the application imported, before the first worker forks."""
    process_gc.settle()


def child_exit(server, worker) -> None:
    """In the master, after a worker exited: its connection count no longer counts."""
    gunicorn_worker.release_slot(worker)
