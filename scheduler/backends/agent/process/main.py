"""`osmo backend-agent --url URL --token TOKEN --name NAME [--kubeconfig PATH]`.

Four loops over one connection to the service, each retrying with exponential backoff:

- the watchers (Nodes, our pods) put messages into the outbox: a full LIST first — chunked,
  then ``nodes_listed`` / ``pods_listed`` so the service drops what is gone — then WATCH;
- the sender posts the outbox's oldest messages (a heartbeat when there is nothing else) and
  drops what the service acked; what it did not ack is sent again;
- the worker long-polls for work, applies the items in id order — consecutive creates
  together, each PodGroup's in order, on threads of their own — and acks them with the next
  poll; an item it could not apply (the cluster away) is not acked, so it comes again, and
  what follows it waits;
- the log follower reads the new lines of the running pods whose logs someone reads (the
  poll's answer names them) into the outbox.

When the service was unreachable and answers again, the agent registers again and re-lists
everything (a reconnect), so the service reconciles what changed meanwhile.

Two agents may serve one backend: the service leases it to one instance (``--identity``), and
the other stands by — it registers again every 2 s and starts nothing until its register
wins the lease. A leader told it leads no more (409 ``agent_not_leader``) stands by the same
way; one cut off from the service stops acting on its cluster once its lease may have ended
(``lease.py``), whatever work it holds.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from kubernetes import config

from scheduler.backends.spec import KUBERNETES, BackendSpec
from scheduler.core import SchedulerConfig
from scheduler.cycle_figures import MAX_CYCLE_PENDING, queue_figures
from scheduler.cycle_tally import carry_tally, cycle_tally

from ...kubernetes.client import POOL_SIZE, api_client
from ...kubernetes.first_bound import first_bound, remember
from ...kubernetes.kai_requirements import cluster_missing
from ...kubernetes.placement import USAGE_REFRESH_SECONDS
from ...kubernetes.placement_loop import cycle_metrics, placement_loop
from ...kubernetes.reporter import pending_gangs
from .cluster import (
    Applier,
    Fenced,
    NodeWatcher,
    PodWatcher,
    Transient,
    cluster_identity,
    kube_from,
)
from .lease import RETRY_SECONDS
from .live_logs import LogFollower
from .outbox import Outbox
from .service import NotLeader, Refused, Service, Unreachable

logger = logging.getLogger("osmo.agent")

HEARTBEAT_SECONDS = 5.0
PLACEMENT_SECONDS = 60.0  # how often the placement's readiness is checked again
POLL_WAIT_SECONDS = 10.0
MAX_BACKOFF_SECONDS = 10.0
APPLY_THREADS = POOL_SIZE  # work items applied at once: each mostly waits for the API server
EXIT_REFUSED = 3
EXIT_USAGE = 2


def build_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--url", required=True, help="the service's URL")
    parser.add_argument("--token", default=os.environ.get("OSMO_AGENT_TOKEN") or None,
                        required=not os.environ.get("OSMO_AGENT_TOKEN"),
                        help="a token of a user in osmo-backend-NAME (or osmo-backend); "
                             "default: $OSMO_AGENT_TOKEN (not on the command line, where "
                             "every local user can read it)")
    parser.add_argument("--name", required=True, help="the backend this agent serves")
    parser.add_argument("--kubeconfig", default=None,
                        help="the cluster's kubeconfig (default: the pod's service account)")
    parser.add_argument("--identity", default=os.environ.get("OSMO_AGENT_IDENTITY") or None,
                        help="this agent's identity for the backend's lease (default: "
                             "$OSMO_AGENT_IDENTITY, else random per start); a restart under "
                             "the same identity (the pod's name) leads again at once")
    return parser


class Agent:
    def __init__(self, *, url: str, token: str, name: str, kubeconfig: str | None,
                 identity: str | None = None):
        self.name = name
        self.identity = identity or secrets.token_hex(8)
        self.kubeconfig = kubeconfig
        self.kube = kube_from(kubeconfig)
        self.service = Service(url, token, name, self.identity)
        self.lease = self.service.lease
        self.outbox = Outbox()
        self.stop = threading.Event()
        self.reconnect = threading.Event()
        self.applied_through = 0  # the highest work id applied (in id order)
        self.namespace = ""
        self.placement = ""
        self.scheduler: dict = {}  # how our placement runs its cycles (placement osmo)
        self._first_bound: dict[str, None] = {}  # workflows a cycle bound a first time
        self.usage: dict[str, float] = {}  # the queues' historical usage, as the service has it
        self._usage_due = 0.0  # monotonic time to ask for it again
        self._placement_due = 0.0  # monotonic time of the next readiness report
        self.session = ""  # when the service saw this connection begin
        self.failure: Exception | None = None
        self.watchers: list = []
        self.logs = LogFollower(self.kube, self.outbox, self.stop)
        self._session = threading.Lock()
        self._appliers = ThreadPoolExecutor(APPLY_THREADS, thread_name_prefix="agent-apply")

    # --- session -----------------------------------------------------------------------------
    def register(self) -> None:
        """Register, which takes the backend's lease: until it does (another agent leads),
        stand by, registering again every ``RETRY_SECONDS``."""
        delay = 0.2
        standing_by = False
        while not self.stop.is_set():
            try:
                uid, version = cluster_identity(self.kube)
                answer = self.service.register(k8s_uid=uid, version=version)
                self.namespace = answer["k8s_namespace"]
                self.placement = answer.get("placement", "")
                self.scheduler = answer.get("scheduler") or {}
                self._placement_due = 0.0  # a (re)connect: reported again at once
                self.session = answer["session"]
                logger.info("agent %s: registered (cluster %s, namespace %s): %s leads",
                            self.name, uid, self.namespace, self.identity)
                return
            except NotLeader as exc:
                if not standing_by:
                    logger.info("agent %s: %s stands by: %s", self.name, self.identity, exc)
                    standing_by = True
                self.outbox.clear()  # the leader reports the cluster; a re-list follows
                self.stop.wait(RETRY_SECONDS)
                continue
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

    def _deposed(self, where: str, exc: Exception) -> None:
        """Another agent leads now, or this one's lease ended: stand by until a register
        wins it back (then re-list)."""
        logger.warning("agent %s: %s: %s leads no more: %s", self.name, where, self.identity,
                       exc)
        self.reconnect.set()
        self._reconnected()

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

    # --- placement osmo: our scheduler beside the API server -----------------------------
    def start_placement(self) -> None:
        """Our scheduler's loop over this cluster, as the service's backend process runs it:
        a cycle only while this agent leads (a standby, a deposed or cut-off leader binds
        nothing), each cycle's figures sent to the service for the backend's cycle record."""
        knobs = self.scheduler
        spec = BackendSpec(name=self.name, kind=KUBERNETES, placement="osmo",
                           namespace=self.namespace, scheduler_name=knobs["scheduler_name"],
                           kubeconfig=self.kubeconfig, interval=float(knobs["interval"]))
        config = SchedulerConfig(reserve_after_seconds=float(knobs["reserve_after_seconds"]),
                                 max_reservations=int(knobs["max_reservations"]),
                                 usage_k_value=float(knobs["usage_k_value"]))
        wake = threading.Event()
        threading.Thread(target=lambda: (self.stop.wait(), wake.set()), daemon=True).start()
        threading.Thread(target=placement_loop, name="agent-placement", daemon=True, kwargs=dict(
            running=lambda: not self.stop.is_set(), wake=wake, spec=spec,
            interval=spec.interval, client_factory=lambda: api_client(kubeconfig=self.kubeconfig),
            publish=self.publish_cycle, may_place=self.lease.held, config=config,
            usage=lambda: self.usage)).start()

    def publish_cycle(self, placement, figures) -> None:
        """The cycle's record, as the service's backend process writes its own: the latest
        only (a cycle not sent yet is replaced by the next one), with what it adds to the
        scheduler's metrics (its ``tally``, which the next one carries on when it replaces
        it: nothing is lost while the service is unreachable)."""
        first = first_bound(placement, self._first_bound)
        remember(self._first_bound, first)
        self.outbox.put_latest("cycle", {
            "at": figures.at, "duration_ms": figures.duration_ms, "bound": figures.bound,
            "evicted": figures.evicted,
            "queues": [vars(queue) for queue in queue_figures(placement.last_result)],
            "pending_gangs": [vars(gang) for gang in
                              pending_gangs(placement)[:MAX_CYCLE_PENDING]],
            "metrics": cycle_metrics(placement, figures),
            "tally": cycle_tally(figures, first)}, merge=carry_tally)

    # --- loops -------------------------------------------------------------------------------
    def send_loop(self) -> None:
        delay = 0.2
        while not self.stop.is_set():
            self.report_placement()
            # Heartbeats renew the lease well within its renew deadline.
            self.outbox.ready.wait(min(HEARTBEAT_SECONDS, self.lease.renew_deadline / 2))
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
            except NotLeader as exc:
                self._deposed("sending", exc)
            except Refused as exc:
                self.fail(exc)

    def work_loop(self) -> None:
        applier = Applier(self.kube, self.namespace, may_act=self.lease.held)
        acks: list[dict] = []
        delay = 0.2
        while not self.stop.is_set():
            try:
                asks = self.placement == "osmo" and time.monotonic() >= self._usage_due
                answer = self.service.poll(acks=acks, wait=POLL_WAIT_SECONDS,
                                           following=self.logs.following(), usage=asks)
                if "usage" in answer:
                    self.usage = answer["usage"]
                    self._usage_due = time.monotonic() + USAGE_REFRESH_SECONDS
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
            except NotLeader as exc:
                acks = []  # its items go again to whoever leads, applied once there
                self._deposed("polling", exc)
                continue
            except Refused as exc:
                self.fail(exc)
                return
            delay = 0.2
            done, wait = self.apply_items(applier, items)
            acks += done
            if wait:
                self.stop.wait(wait)

    def apply_items(self, applier: Applier, items: list[dict]) -> tuple[list[dict], float]:
        """Apply a poll's items; returns their acks and how long to wait before the next poll
        (0: at once). Consecutive creates are applied together, each PodGroup's items in id
        order on one of ``APPLY_THREADS`` threads (an agent's calls overlap as the in-process
        dispatcher's do); any other item waits for those before it and goes alone. After a
        run with an item not done the rest waits: it comes again, in order."""
        acks: list[dict] = []
        for run in _runs(items):
            chains: dict[object, list[dict]] = {}
            for item in run:
                chains.setdefault(item["payload"].get("podgroup") or item["id"], []).append(item)
            outcomes = list(self._appliers.map(lambda chain: self._apply_chain(applier, chain),
                                               chains.values()))
            acks += [ack for chain_acks, _ in outcomes for ack in chain_acks]
            done = {ack["id"] for ack in acks}
            for item in run:  # the highest id applied in id order
                if item["id"] not in done:
                    break
                self.applied_through = max(self.applied_through, item["id"])
            waits = [wait for _, wait in outcomes if wait is not None]
            if waits or self.stop.is_set():
                return acks, max(waits, default=0.0)
        return acks, 0.0

    def _apply_chain(self, applier: Applier, chain: list[dict]) -> tuple[list[dict], float | None]:
        """Items in id order until one is not done; their acks and, when one was not, the
        seconds to wait (0: none)."""
        acks: list[dict] = []
        for item in chain:
            if self.stop.is_set():
                return acks, 0.0
            try:
                error = applier.apply(item)
            except Fenced as exc:
                logger.warning("agent %s: work %s: %s (%.1f s past the renew deadline)",
                               self.name, item["id"], exc, self.lease.ended_ago())
                return acks, 0.0  # unacked: it comes again once the lease is renewed
            except Transient as exc:
                (logger.debug if exc.quiet else logger.warning)(
                    "agent %s: work %s: %s", self.name, item["id"], exc)
                return acks, exc.retry_after or 0.2
            acks.append({"id": item["id"], "error": error})
        return acks, None

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
        if self.placement == "osmo":
            self.start_placement()
        sender = threading.Thread(target=self.send_loop, name="agent-send", daemon=True)
        sender.start()
        self.work_loop()
        self.stop.set()
        sender.join(timeout=5)
        self._appliers.shutdown(wait=False, cancel_futures=True)
        self.service.close()
        return EXIT_REFUSED if self.failure else 0


def _runs(items: list[dict]) -> list[list[dict]]:
    """The items in runs applied together: consecutive creates, or one other item."""
    runs: list[list[dict]] = []
    for item in items:
        if item["kind"] == "create" and runs and runs[-1][-1]["kind"] == "create":
            runs[-1].append(item)
        else:
            runs.append([item])
    return runs


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
                      kubeconfig=args.kubeconfig, identity=args.identity)
    except config.ConfigException as exc:
        logger.error("agent %s: no usable kubeconfig: %s", args.name, exc)
        return EXIT_USAGE
    signal.signal(signal.SIGTERM, lambda *_: agent.stop.set())
    return agent.run()
