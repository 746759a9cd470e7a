"""`osmo backend-agent --url URL --token TOKEN --name NAME [--kubeconfig PATH]`.

Four loops over one connection to the service, each retrying with exponential backoff:

- the watchers (Nodes, our pods) put messages into the outbox: a full LIST first — chunked,
  then ``nodes_listed`` / ``pods_listed`` so the service drops what is gone — then WATCH;
- the sender posts the outbox's oldest messages (a heartbeat when there is nothing else) and
  drops what the service acked; what it did not ack is sent again;
- the worker long-polls for work, applies each item in id order and acks it with the next
  poll; an item it could not apply (the cluster away) is not acked, so it comes again;
- the log follower reads the new lines of the running pods whose logs someone reads (the
  poll's answer names them) into the outbox.

When the service was unreachable and answers again, the agent registers again and re-lists
everything (a reconnect), so the service reconciles what changed meanwhile.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time

from django.conf import settings
from kubernetes import config

from ...kubernetes.kai_requirements import cluster_missing
from .cluster import Applier, NodeWatcher, PodWatcher, Transient, cluster_identity, kube_from
from .live_logs import LogFollower
from .outbox import Outbox
from .service import Refused, Service, Unreachable

logger = logging.getLogger("osmo.agent")

HEARTBEAT_SECONDS = 5.0
PLACEMENT_SECONDS = 60.0  # how often the placement's readiness is checked again
POLL_WAIT_SECONDS = 10.0
MAX_BACKOFF_SECONDS = 10.0
EXIT_REFUSED = 3
EXIT_USAGE = 2


def build_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--url", required=True, help="the service's URL")
    parser.add_argument("--token", required=True,
                        help="a token of a user in osmo-backend-NAME (or osmo-backend)")
    parser.add_argument("--name", required=True, help="the backend this agent serves")
    parser.add_argument("--kubeconfig", default=None,
                        help="the cluster's kubeconfig (default: the pod's service account)")
    return parser


class Agent:
    def __init__(self, *, url: str, token: str, name: str, kubeconfig: str | None):
        self.name = name
        self.kube = kube_from(kubeconfig)
        self.service = Service(url, token, name)
        self.outbox = Outbox()
        self.stop = threading.Event()
        self.reconnect = threading.Event()
        self.applied_through = 0  # the highest work id applied (in id order)
        self.namespace = ""
        self.placement = ""
        self._placement_due = 0.0  # monotonic time of the next readiness report
        self.session = ""  # when the service saw this connection begin
        self.failure: Exception | None = None
        self.watchers: list = []
        self.logs = LogFollower(self.kube, self.outbox, self.stop)
        self._session = threading.Lock()

    # --- session -----------------------------------------------------------------------------
    def register(self) -> None:
        delay = 0.2
        while not self.stop.is_set():
            try:
                uid, version = cluster_identity(self.kube)
                answer = self.service.register(k8s_uid=uid, version=version)
                self.namespace = answer["k8s_namespace"]
                self.placement = answer.get("placement", "")
                self._placement_due = 0.0  # a (re)connect: reported again at once
                self.session = answer["session"]
                logger.info("agent %s: registered (cluster %s, namespace %s)", self.name, uid,
                            self.namespace)
                return
            except Unreachable as exc:
                logger.warning("agent %s: register: %s", self.name, exc)
            except Refused:
                raise
            except Exception as exc:  # noqa: BLE001 - the cluster is away: try again
                logger.warning("agent %s: reading the cluster's identity: %s", self.name, exc)
            self.stop.wait(delay)
            delay = min(delay * 2, MAX_BACKOFF_SECONDS)

    def _unreachable(self, where: str, exc: Exception) -> None:
        logger.warning("agent %s: %s: %s", self.name, where, exc)
        self.reconnect.set()

    def _reconnected(self) -> None:
        """The service answers again: register, then re-list everything."""
        with self._session:  # the sender and the worker may both see it come back
            if not self.reconnect.is_set():
                return
            self.reconnect.clear()
            self.register()
            for watcher in self.watchers:
                watcher.relist_soon()

    def report_placement(self) -> None:
        """What the backend's placement lacks on this cluster (KAI: its CRDs and the OSMO
        PriorityClasses), for ``/api/health``: at every (re)connect and every minute."""
        now = time.monotonic()
        if now < self._placement_due:
            return
        try:
            missing = cluster_missing(self.kube) if self.placement == "kai" else []
        except Exception as exc:  # noqa: BLE001 - the cluster is away: the next time
            logger.warning("agent %s: checking the placement's needs: %s", self.name, exc)
            return
        self._placement_due = now + PLACEMENT_SECONDS
        self.outbox.put("placement", {"missing": missing})

    # --- loops -------------------------------------------------------------------------------
    def send_loop(self) -> None:
        delay = 0.2
        while not self.stop.is_set():
            self.report_placement()
            self.outbox.ready.wait(HEARTBEAT_SECONDS)
            batch = self.outbox.batch()
            if not batch:
                self.outbox.put("heartbeat", {})
                continue
            try:
                acked = self.service.send(batch)
                self.outbox.acked(acked)
                delay = 0.2
                self._reconnected()
                if len(acked) < len(batch):  # the service stopped at one: not too fast
                    self.stop.wait(delay)
            except Unreachable as exc:
                self._unreachable("sending", exc)
                self.stop.wait(delay)
                delay = min(delay * 2, MAX_BACKOFF_SECONDS)
            except Refused as exc:
                self.fail(exc)

    def work_loop(self) -> None:
        applier = Applier(self.kube, self.namespace)
        acks: list[dict] = []
        delay = 0.2
        while not self.stop.is_set():
            try:
                answer = self.service.poll(acks=acks, wait=POLL_WAIT_SECONDS,
                                           following=self.logs.following())
                items = answer["work"]
                self.logs.want(answer.get("logs") or [], self.namespace)
                acks = []
                self._reconnected()
                applier.namespace = self.namespace
            except Unreachable as exc:
                self._unreachable("polling", exc)
                self.stop.wait(delay)
                delay = min(delay * 2, MAX_BACKOFF_SECONDS)
                continue
            except Refused as exc:
                self.fail(exc)
                return
            delay = 0.2
            for item in items:
                if self.stop.is_set():
                    break
                try:
                    error = applier.apply(item)
                except Transient as exc:
                    logger.warning("agent %s: work %s: %s", self.name, item["id"], exc)
                    self.stop.wait(delay)
                    break  # the rest comes again, in order
                acks.append({"id": item["id"], "error": error})
                self.applied_through = max(self.applied_through, item["id"])

    def fail(self, exc: Exception) -> None:
        logger.error("agent %s: refused by the service: %s", self.name, exc)
        self.failure = exc
        self.stop.set()

    def run(self) -> int:
        try:
            self.register()
        except Refused as exc:
            logger.error("agent %s: refused by the service: %s", self.name, exc)
            return EXIT_REFUSED
        self.watchers = [NodeWatcher(self.kube, self.outbox, self.stop),
                         PodWatcher(self.kube, self.outbox, self.stop, self.namespace,
                                    lambda: (self.applied_through, self.session))]
        for watcher in self.watchers:
            watcher.start()
        self.logs.start()
        sender = threading.Thread(target=self.send_loop, name="agent-send", daemon=True)
        sender.start()
        self.work_loop()
        self.stop.set()
        sender.join(timeout=5)
        self.service.close()
        return EXIT_REFUSED if self.failure else 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser(argparse.ArgumentParser(
        prog="osmo backend-agent", description="Serve one Kubernetes backend by dialing out "
                                               "to the service.")).parse_args(argv)
    if not settings.configured:  # bare: no database, no app (see the package's docstring)
        settings.configure(OSMO_METRICS=False, OSMO_KAI_KUBECONFIG=args.kubeconfig)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(message)s")
    logger.info("agent %s: starting", args.name)
    try:
        agent = Agent(url=args.url, token=args.token, name=args.name,
                      kubeconfig=args.kubeconfig)
    except config.ConfigException as exc:
        logger.error("agent %s: no usable kubeconfig: %s", args.name, exc)
        return EXIT_USAGE
    signal.signal(signal.SIGTERM, lambda *_: agent.stop.set())
    return agent.run()
