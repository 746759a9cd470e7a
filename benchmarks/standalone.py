"""The product as a user starts it, for the benchmarks: ``osmo standalone`` on a port of the
benchmarks' range and a data folder of its own, with nothing but the environment a user sets
(``extra_env``: the cluster backend and its kubeconfig). The benchmark process then joins its
embedded PostgreSQL and broker as ``manage.py`` does beside a running server, to seed pools and
users and to read what the product wrote."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PORTS = range(18900, 19000)
# What the benchmark process may have set for itself: never handed to the product.
OWN_ENV = ("OSMO_", "DATABASE_URL", "SECRET_KEY", "REDIS_URL", "CELERY_", "DJANGO_")


def free_port() -> int:
    """A free port of the benchmarks' range (any free one when all are taken)."""
    for port in [*PORTS, 0]:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return probe.getsockname()[1]
    raise RuntimeError("no free port")


class Standalone:
    def __init__(self, data_dir: Path, extra_env: dict[str, str] | None = None):
        self.data_dir = data_dir
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(OWN_ENV)}
        # This checkout's code, for the server and the agents started with its environment: the
        # venv's `osmo` script alone imports whichever checkout the venv was installed from.
        self.env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT), self.env.get("PYTHONPATH")]))
        self.env.update(extra_env or {})
        self.process: subprocess.Popen | None = None

    def start(self) -> str:
        """Start it and wait for "OSMO ready"; returns the admin token it prints."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = (self.data_dir / "standalone.log").open("wb")
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "osmo"), "standalone", "--no-demo", "--port",
             str(self.port), "--data-dir", str(self.data_dir)], env=self.env, cwd=str(ROOT),
            stdout=subprocess.PIPE, stderr=log, text=True)
        for line in self.process.stdout:
            if line.startswith("token: "):
                return line.split(": ", 1)[1].strip()
        raise SystemExit(f"osmo standalone did not start (see {self.data_dir}/standalone.log)")

    def join_database(self) -> None:
        """Set Django up in this process on the running server's embedded PostgreSQL; set up
        already (for an earlier standalone of the same run), point its connections here."""
        os.environ.update(OSMO_DATA_DIR=str(self.data_dir),
                          DJANGO_SETTINGS_MODULE="osmo.settings",
                          **{k: v for k, v in self.env.items() if k.startswith("OSMO_")})
        for found_again in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
            os.environ.pop(found_again, None)  # under this standalone's data folder
        import django
        from django.apps import apps

        from osmo.embedded import prepare_local_environment

        prepare_local_environment()
        if not apps.ready:
            django.setup()
            logging.getLogger("httpx").setLevel(logging.WARNING)
            return
        import dj_database_url
        from django.db import connections

        connections.close_all()
        joined = dj_database_url.parse(os.environ["DATABASE_URL"])
        connections["default"].settings_dict.update(
            {key: joined[key] for key in ("NAME", "USER", "PASSWORD", "HOST", "PORT")})
        broker = os.environ.get("CELERY_BROKER_URL")  # this standalone's, once ready
        if broker:
            from django.conf import settings

            from osmo.celery import app

            settings.CELERY_BROKER_URL = app.conf.broker_url = broker
            app._after_fork()  # drops the connection pools that name the earlier broker

    def bench_token(self, pool: str, quota_gpus: int, **settings) -> str:
        """A pool (``settings``: more of its fields, e.g. ``backends``) and a user of it
        (``bench``); the user's token."""
        from django.db import connections

        from osmo.accounts import services as accounts
        from pools import services as pools

        pools.pool_upsert(actor=None, name=pool, quota_gpus=quota_gpus, **settings)
        user = accounts.user_ensure(username="bench", groups=[f"osmo-{pool}-user"])
        token = accounts.token_issue(user=user)
        connections.close_all()
        return token

    def stop(self) -> None:
        from django.db import connections

        connections.close_all()
        if self.process is not None:
            self.process.terminate()
            self.process.wait(60)
