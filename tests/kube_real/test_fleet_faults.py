"""A cluster dies with work on it and comes back (issue 46), on two real API servers, each
with its agent as its own process, a pool served by both; the test plays KAI (it binds pods)
and each cluster's kubelet (the stand-in starts bound pods and completes deletes).

East runs two gangs — one whose tasks ask RESCHEDULE over exit code 3001 (OSMO's backend
error), one without — and holds two more that wait there for want of GPUs; west runs one.
East's agent is killed and its API server stopped (its etcd keeps the objects). It proves:

- the waiting gangs are created on west in west's first dispatch cycle after east's lease
  ends, not before, while east's running gangs stay east's;
- after the (shortened) lost timeout the running gang that asks runs again on west (its
  retry 1) and the other ends FAILED_BACKEND_ERROR with exit code 3001;
- east's API server comes back with its old objects and its agent after it: once the agent's
  first reconcile is acked, east holds 0 pods and 0 PodGroups (every gang there moved or
  ended), and nothing changes the service's view of them;
- over the whole run a sampler listing both API servers every ~0.2 s sees no gang with pods
  in both clusters, but for east's leftovers (pods east held when it died) between its API
  server's return and that reconcile — and east never receives a new pod after its death;
- every submission the API acknowledged (201), one of them made during the outage, is there
  at the end, running or ended as above.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from kubernetes import client as kube_client

from scheduler.backends import services as backend_services
from scheduler.backends.lost import backends_lost_pass, lost_since
from scheduler.core.kai_names import GROUP_LABEL, WORKFLOW_LABEL
from scheduler.models import AgentWork, Backend, Node
from tests import factories
from tests.k8s.conftest import spec, submit, workflow
from workflows.models import WorkflowGroup

from .agent import install_agent_rbac, wait_until
from .conftest import Cluster
from .kubelet import Kubelet
from .server import ApiServer
from .test_agent import agent_of

pytestmark = pytest.mark.timeout(420)
LEASE = 8  # OSMO_BACKEND_LEASE: the agents beat every 5 s
LOST = 15  # OSMO_BACKEND_LOST_TIMEOUT, past the lease
# One dispatch cycle: west's long poll runs the fleet pass and claims every 0.25 s
# (agent_views.POLL_STEP_SECONDS) and answers at once with work; its agent then creates a
# PodGroup and two pods per gang. Well under a second when idle; 10 s on a loaded 2-core box.
CYCLE = 10
SAMPLE = 0.2  # the sampler's period
GPUS = 2  # per task; every gang is two tasks
RERUN = spec("rerun", gpus=GPUS, tasks=2).replace(
    "resource: r", 'resource: r, exitActions: {RESCHEDULE: "3001"}')


class Sampler:
    """Lists both clusters' pods with the official client every ``SAMPLE`` seconds (a
    cluster whose API server does not answer is skipped for that sample); keeps every pod
    uid seen in each, and each sample where one gang (workflow group) had pods in both."""

    def __init__(self, servers: dict[str, ApiServer], namespace: str):
        self.namespace = namespace
        self.apis = {name: kube_client.CoreV1Api(server.admin_client())
                     for name, server in servers.items()}
        self.seen: dict[str, dict[str, float]] = {name: {} for name in servers}  # uid → first
        self.both: list[tuple[float, tuple[str, str], frozenset[str]]] = []  # east's uids
        self.samples = {"both up": 0, "one down": 0}
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="sampler")

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        for api in self.apis.values():
            api.api_client.close()

    def gangs(self, name: str) -> dict[tuple[str, str], set[str]] | None:
        try:
            pods = self.apis[name].list_namespaced_pod(self.namespace, _request_timeout=3).items
        except Exception:  # noqa: BLE001 - its API server is down (the fault under test)
            return None
        now, found = time.monotonic(), {}
        for pod in pods:
            labels = pod.metadata.labels or {}
            key = (labels.get(WORKFLOW_LABEL, ""), labels.get(GROUP_LABEL, ""))
            found.setdefault(key, set()).add(pod.metadata.uid)
            self.seen[name].setdefault(pod.metadata.uid, now)
        return found

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                began = time.monotonic()
                east, west = self.gangs("east"), self.gangs("west")
                if east is None or west is None:
                    self.samples["one down"] += 1
                else:
                    self.samples["both up"] += 1
                    self.both.extend((began, key, frozenset(east[key]))
                                     for key in east.keys() & west.keys())
            except Exception as exc:  # noqa: BLE001 - kept, fails the test
                self.errors.append(exc)
                return
            self._stop.wait(max(0.0, SAMPLE - (time.monotonic() - began)))


def pods_of(name: str, *, retry: int = 0) -> list[str]:
    suffix = f"-r{retry}" if retry else ""
    return [f"{name}-g-t{i}{suffix}" for i in range(2)]


def place(hands: Cluster, pods: list[str], node: str) -> None:
    """As KAI: bind the gang's pods once they are all there (the kubelet starts them)."""
    wait_until(lambda: set(pods) <= set(hands.names("pods")), 60,
               f"{pods} created on {hands.server.server}")
    for pod in pods:
        hands.bind(pod, node)


def view(client, name: str) -> tuple:
    """The workflow as the API shows it: status, its group's backend and run, each task's
    status, node and exit code."""
    body = workflow(client, name)
    group = body["groups"][0]
    return (body["status"], group["backend"], group["retry_id"],
            [(t["status"], t["node"], t["exit_code"]) for t in group["tasks"]])


def running(client, name: str, backend: str, node: str, retry: int = 0):
    return lambda: view(client, name) == ("RUNNING", backend, retry,
                                          [("RUNNING", node, None)] * 2)


def recovery_timeline(names: list[str], lease_end, agent) -> str:
    """What a slow recovery is made of: each gang's move, its work items on west (created,
    acked), and west's agent log."""
    lines = [f"lease end {lease_end:%H:%M:%S.%f}"]
    for group in WorkflowGroup.objects.filter(workflow__name__in=names):
        lines.append(f"{group.podgroup}: backend {group.backend}, moved "
                     f"{group.backend_moved_at and f'{group.backend_moved_at:%H:%M:%S.%f}'}")
        lines += [f"  work {item.pk} {item.kind} on {item.backend}: created "
                  f"{item.created_at:%H:%M:%S.%f}, acked "
                  f"{item.acked_at and f'{item.acked_at:%H:%M:%S.%f}'} {item.outcome}"
                  for item in AgentWork.objects.filter(group=group).order_by("pk")]
    return "\n".join(lines) + f"\nwest's agent log:\n{agent.log_tail()}"


def official_listing(server: ApiServer, namespace: str) -> tuple[list[str], list[str]]:
    """The namespace's pods and PodGroups, straight from the API server (official client)."""
    api = server.admin_client()
    try:
        pods = kube_client.CoreV1Api(api).list_namespaced_pod(namespace).items
        groups = kube_client.CustomObjectsApi(api).list_namespaced_custom_object(
            "scheduling.run.ai", "v2alpha2", namespace, "podgroups")["items"]
    finally:
        api.close()
    return (sorted(p.metadata.name for p in pods),
            sorted(g["metadata"]["name"] for g in groups))


@override_settings(OSMO_BACKEND_LEASE=LEASE, OSMO_BACKEND_LOST_TIMEOUT=LOST)
def test_a_dead_clusters_gangs_move_or_end_by_the_lost_timeout_and_it_returns_clean(
        apiserver, west_apiserver, k8s_settings, namespace, transactional_db, live_server,
        tmp_path, cluster, alice):
    west_apiserver.namespace(namespace)
    other = Cluster(west_apiserver, namespace)
    for server, name in ((apiserver, "east"), (west_apiserver, "west")):
        install_agent_rbac(server, namespace)
        backend_services.backend_upsert(name=name, kind="kubernetes", k8s_namespace=namespace)
    east = agent_of(apiserver, live_server, tmp_path, "east")
    west = agent_of(west_apiserver, live_server, tmp_path, "west")
    cluster.add_node("east-n1", gpus=8)  # the two running gangs fill it
    for node in ("west-n1", "west-n2"):
        other.add_node(node, gpus=12)  # room for everything that ends up on west
    factories.pool("team", 64, backends=["east", "west"])
    kubelets = {"east": Kubelet(apiserver, namespace).start(),
                "west": Kubelet(west_apiserver, namespace).start()}
    sampler = Sampler({"east": apiserver, "west": west_apiserver}, namespace).start()
    acknowledged: list[str] = []

    def accepted(text: str) -> str:
        acknowledged.append(submit(alice, "team", text))  # submit() asserts the 201
        return acknowledged[-1]

    east_down = False
    try:
        # West is not up yet (OFFLINE, never connected): every gang is chosen east.
        east.start()
        wait_until(lambda: Node.objects.filter(backend="east").count() == 1, 30,
                   "east's node mirrored", east)
        rerun, plain = accepted(RERUN), accepted(spec("plain", gpus=GPUS, tasks=2))
        waiting = [accepted(spec(f"wait{i}", gpus=GPUS, tasks=2)) for i in range(2)]
        for name in (rerun, plain):
            place(cluster, pods_of(name), "east-n1")
        for name in (rerun, plain):
            wait_until(running(alice, name, "east", "east-n1"), 60, f"{name} RUNNING on east",
                       east)
        wait_until(lambda: set(cluster.names("pods")) == {
            p for n in (rerun, plain, *waiting) for p in pods_of(n)}, 30,
            "the waiting gangs' pods on east too", east)
        west.start()
        wait_until(lambda: Node.objects.filter(backend="west").count() == 2, 30,
                   "west's nodes mirrored", west)
        on_west = accepted(spec("west", gpus=GPUS, tasks=2))  # east is full: west starts it
        place(other, pods_of(on_west), "west-n1")
        wait_until(running(alice, on_west, "west", "west-n1"), 60, "RUNNING on west", west)
        for name in waiting:  # not placed: east has no GPU left
            assert view(alice, name) == ("PENDING", "east", 0, [("SCHEDULING", None, None)] * 2)
            assert [cluster.get("pods", p)["spec"].get("nodeName") for p in pods_of(name)] \
                == [None, None]

        # East dies: its agent (SIGKILL), its kubelets, its API server (etcd keeps the data).
        leftovers = {cluster.get("pods", p)["metadata"]["uid"]
                     for n in (rerun, plain, *waiting) for p in pods_of(n)}
        east.kill()
        dead = kubelets.pop("east")
        dead.stop()
        dead.check()
        apiserver.stop_apiserver()
        east_down = True
        during = accepted(spec("during", gpus=GPUS, tasks=2))  # acknowledged in the outage
        place(other, pods_of(during), "west-n1")
        wait_until(running(alice, during, "west", "west-n1"), 60, "RUNNING on west", west)

        # The lease ends: the waiting gangs are created on west within one dispatch cycle.
        moved = {p for n in waiting for p in pods_of(n)}
        wait_until(lambda: moved <= set(other.names("pods")), LEASE + CYCLE + 30,
                   "the waiting gangs' pods on west", west)
        lease_end = Backend.objects.get(name="east").last_heartbeat + timedelta(seconds=LEASE)
        # When west's agent had created them: its acks of their creates (an ack follows the
        # create), not when this test looked — the steps above may end after that.
        creates = AgentWork.objects.filter(backend="west", kind="create",
                                           group__workflow__name__in=waiting)
        wait_until(lambda: creates.filter(acked_at__isnull=False).count() == 4, CYCLE,
                   "west's acks of the waiting gangs' creates", west)
        recovery = (max(creates.values_list("acked_at", flat=True)) - lease_end).total_seconds()
        print(f"recovery: the waiting gangs' pods on west {recovery:.1f} s after east's "
              f"lease ended")
        assert 0 < recovery < CYCLE, recovery_timeline(waiting, lease_end, west)
        for group in WorkflowGroup.objects.filter(workflow__name__in=waiting):
            assert group.backend == "west" and group.backend_moved_at >= lease_end
        for name in (rerun, plain):  # started: theirs until the lost timeout
            assert view(alice, name) == ("RUNNING", "east", 0, [("RUNNING", "east-n1", None)] * 2)
        for name in waiting:
            place(other, pods_of(name), "west-n2")
            wait_until(running(alice, name, "west", "west-n2"), 60, f"{name} on west", west)

        # The lost timeout ends (the test runs the beat's lost pass, as Celery beat would):
        # one gang runs again on west, the other ends with exit code 3001.
        due = lost_since(Backend.objects.get(name="east").last_heartbeat)
        deadline = time.monotonic() + LEASE + LOST + 60
        while not (ended := backends_lost_pass()):
            assert time.monotonic() < deadline, "the lost pass ended nothing"
            time.sleep(0.5)
        assert ended == {"east": 2} and timezone.now() >= due
        assert view(alice, plain) == ("FAILED_BACKEND_ERROR", "east", 0,
                                      [("FAILED_BACKEND_ERROR", "east-n1", 3001)] * 2)
        lost_at = time.monotonic()
        wait_until(lambda: set(pods_of(rerun, retry=1)) <= set(other.names("pods")),
                   CYCLE + 30, "the rerun's retry 1 on west", west)
        assert time.monotonic() - lost_at < CYCLE
        place(other, pods_of(rerun, retry=1), "west-n2")
        wait_until(running(alice, rerun, "west", "west-n2", retry=1), 60,
                   "the rerun RUNNING on west", west)

        # East returns: its API server on the same etcd (the old objects there), its
        # kubelets, then its agent, whose first reconcile deletes what moved or ended.
        assert official_listing(west_apiserver, namespace)[0] == sorted(
            [p for n in (on_west, during, *waiting) for p in pods_of(n)]
            + pods_of(rerun, retry=1))
        returned = time.monotonic()
        apiserver.start_apiserver()
        east_down = False
        gone_from_east = (rerun, plain, *waiting)
        assert official_listing(apiserver, namespace) == (  # the leftovers, as east died
            sorted(p for n in gone_from_east for p in pods_of(n)),
            sorted(f"{n}-g" for n in gone_from_east))
        kubelets["east"] = Kubelet(apiserver, namespace).start()
        east.start()
        wait_until(lambda: AgentWork.objects.filter(backend="east", kind="delete").exists()
                   and not AgentWork.objects.filter(backend="east", acked_at__isnull=True)
                   .exists(), 60, "east's first reconcile acked", east)
        assert sorted(AgentWork.objects.filter(backend="east", kind="delete")
                      .values_list("group__workflow__name", "outcome")) == sorted(
            (n, "") for n in gone_from_east)  # one delete of each, each done
        # Its bound pods were Running: the deletes end with its kubelet's final delete.
        wait_until(lambda: official_listing(apiserver, namespace) == ([], []), 30,
                   "east holding 0 pods and 0 PodGroups", east)
        reconciled = time.monotonic()
        print(f"east's leftovers gone {reconciled - returned:.1f} s after its API server "
              "was started again")
        time.sleep(3 * SAMPLE)  # the sampler sees east empty too

        expected = {rerun: ("RUNNING", "west", 1, [("RUNNING", "west-n2", None)] * 2),
                    plain: ("FAILED_BACKEND_ERROR", "east", 0,
                            [("FAILED_BACKEND_ERROR", "east-n1", 3001)] * 2),
                    **{n: ("RUNNING", "west", 0, [("RUNNING", "west-n2", None)] * 2)
                       for n in waiting},
                    **{n: ("RUNNING", "west", 0, [("RUNNING", "west-n1", None)] * 2)
                       for n in (on_west, during)}}
        assert {name: view(alice, name) for name in acknowledged} == expected
        assert official_listing(apiserver, namespace) == ([], [])
    finally:
        sampler.stop()
        east.stop()
        west.stop()
        if east_down:
            apiserver.start_apiserver()  # the session's server: the fixtures clean it
        for stand_in in kubelets.values():
            stand_in.stop()
        for plural in ("pods", "podgroups"):
            west_apiserver.request("DELETE", other._path(plural),
                                   query=[("gracePeriodSeconds", "0")])
        for node in other.added:
            other.delete_node(node)

    assert not sampler.errors, sampler.errors
    assert sampler.samples["both up"] > 0 and sampler.samples["one down"] > 0
    # No gang in two clusters, but for east's leftovers between its return and the reconcile.
    outside = [(at, key) for at, key, uids in sampler.both
               if at < returned or at > reconciled or not uids <= leftovers]
    assert outside == []
    window = sorted({key[0] for _, key, _ in sampler.both})
    print(f"east's leftovers seen beside their gang's pods on west: {window}")
    assert set(window) <= {rerun, *waiting}  # the moved and rerun gangs only
    # East held exactly its four gangs' pods over the whole run: none sent after its death.
    assert set(sampler.seen["east"]) == leftovers
    for stand_in in kubelets.values():
        stand_in.check()
