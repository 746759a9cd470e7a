"""Agent failover and partition self-fencing (issue 46) on a real API server, the agents run as
their own processes against the live service: two agents for one backend, one leads; the
leader is killed while gangs wait and the standby takes over within the lease and a poll,
every pod created once. An agent cut off from the service (a TCP proxy holding its bytes)
while its API server stays up creates nothing once its lease may have ended, even with work
in hand, and creates it only after it leads again."""

from __future__ import annotations

import time

import pytest
from django.test import override_settings
from django.utils import timezone

from scheduler.backends import services as backend_services
from scheduler.models import AgentLease, AgentWork, Backend, GroupDispatch
from tests import factories
from tests.k8s.conftest import spec, submit
from workflows.models import WorkflowGroup

from .agent import AgentProcess, agent_kubeconfig, install_agent_rbac, wait_until
from .tcp_proxy import TcpProxy
from .test_agent import agent_of, east_nodes

pytestmark = pytest.mark.timeout(240)

LEASE = 12  # OSMO_AGENT_LEASE's default
TAKEOVER = 15  # the bound: kube-scheduler's lease, from the leader's death
RETRY = 2  # a standby's register again
POLL = 10  # the agent's long poll
SLACK = 2  # a loaded 2-core machine


@pytest.fixture
def backend_east(apiserver, k8s_settings, namespace, transactional_db):
    install_agent_rbac(apiserver, namespace)
    backend_services.backend_upsert(name="east", kind="kubernetes", k8s_namespace=namespace)


def holder() -> str | None:
    return AgentLease.objects.filter(backend="east").values_list("holder", flat=True).first()


def uids(cluster) -> dict[str, str]:
    body = cluster.server.request("GET", cluster._path("pods"))
    return {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in body["items"]}


def test_the_standby_takes_over_a_killed_leaders_waiting_gangs_and_creates_each_pod_once(
        backend_east, apiserver, live_server, tmp_path, cluster, alice):
    first = agent_of(apiserver, live_server, tmp_path, "east")
    token = first.argv[first.argv.index("--token") + 1]
    kubeconfig = agent_kubeconfig(apiserver, tmp_path / "east.kubeconfig")
    leader, standby = (AgentProcess(url=live_server.url, token=token, name="east",
                                    kubeconfig=kubeconfig, log=tmp_path / f"agent-{who}.log",
                                    identity=f"east-{who}") for who in ("a", "b"))
    cluster.add_node("east-n1", gpus=8)
    factories.pool("team", 1024, backends=["east"])
    try:
        leader.start()
        wait_until(lambda: east_nodes() == ["east-n1"] and holder() == "east-a", 30,
                   "a leads and mirrors the node", leader)
        standby.start()
        wait_until(lambda: "east-b stands by" in standby.log.read_text(), 30,
                   "b stands by", standby)
        first_gang = submit(alice, "team", spec("first", gpus=1, tasks=2))
        wait_until(lambda: len(cluster.names("pods")) == 2, 30, "a's pods", leader)

        # Gangs waiting: a 1,000-pod one (many items of pods after its head) and two behind
        # it; a is killed (SIGKILL) early while it creates the big one's pods, well before its
        # parallel creates could finish them.
        big = submit(alice, "team", spec("big", gpus=1, tasks=1000))
        behind = [submit(alice, "team", spec(f"w{i}", gpus=1, tasks=3)) for i in range(2)]
        expected = {f"{first_gang}-g-t{i}" for i in range(2)} | {
            f"{big}-g-t{i}" for i in range(1000)} | {
            f"{name}-g-t{i}" for name in behind for i in range(3)}
        wait_until(lambda: len(cluster.names("pods")) >= 20, 60, "a creating the big gang",
                   leader)
        leader.kill()
        killed = time.monotonic()
        before = uids(cluster)
        assert len(before) < len(expected), "a finished before it was killed: no handover"
        assert holder() == "east-a"
        unacked = set(AgentWork.objects.filter(backend="east", kind="create",
                                               acked_at__isnull=True)
                      .values_list("pk", flat=True))
        assert unacked  # handed out to a (or still to be), not acked

        wait_until(lambda: holder() == "east-b", LEASE + RETRY + SLACK + 5, "b takes over",
                   standby)
        took_over = time.monotonic() - killed
        wait_until(lambda: set(cluster.names("pods")) == expected, POLL + 20,
                   "every pod of every gang", standby)
        all_created = time.monotonic() - killed
        print(f"failover: b leads {took_over:.1f} s after a was killed, every pod "
              f"{all_created:.1f} s after")
        assert took_over <= TAKEOVER  # at most the lease and one retry after its last call
        assert all_created <= LEASE + RETRY + POLL + SLACK

        after = uids(cluster)
        assert len(after) == len(expected)  # nothing else, nothing twice
        assert {name: after[name] for name in before} == before  # none made again
        assert cluster.names("podgroups") == sorted(
            f"{name}-g" for name in (first_gang, big, *behind))
        lease = AgentLease.objects.get(backend="east")
        assert (lease.holder, lease.transitions) == ("east-b", 1)
        wait_until(lambda: not AgentWork.objects.filter(backend="east",
                                                        acked_at__isnull=True).exists(),
                   POLL + 10, "every item acked (with b's next poll)", standby)
        assert set(AgentWork.objects.filter(kind="create").values_list("outcome", flat=True)) \
            == {""}
        dispatches = list(GroupDispatch.objects.values_list("applied_at", "last_error"))
        assert len(dispatches) == 4 and all(at is not None and error == ""
                                            for at, error in dispatches)
        assert set(WorkflowGroup.objects.values_list("backend", flat=True)) == {"east"}
        assert Backend.objects.get(name="east").last_heartbeat is not None

        # a comes back (its pod restarted, the same identity): b leads, a stands by.
        leader.start()
        wait_until(lambda: leader.log.read_text().count("east-a stands by") >= 1, 30,
                   "a stands by", leader)
        time.sleep(RETRY * 2)
        assert holder() == "east-b" and uids(cluster) == after
    finally:
        leader.stop()
        standby.stop()


def agent_log_after(agent: AgentProcess, mark: int) -> str:
    return agent.log.read_text(errors="replace")[mark:]


@override_settings(OSMO_BACKEND_LEASE=60)  # the backend stays ONLINE: no gang moves
def test_an_agent_cut_off_from_the_service_creates_nothing_past_its_lease(
        backend_east, apiserver, live_server, tmp_path, cluster, alice):
    proxy = TcpProxy(live_server.url).start()
    agent = agent_of(apiserver, proxy, tmp_path, "east")
    cluster.add_node("east-n1", gpus=8)
    factories.pool("team", 64, backends=["east"])
    try:
        agent.start()
        wait_until(lambda: east_nodes() == ["east-n1"] and not AgentWork.objects.filter(
            acked_at__isnull=True).exists(), 30, "the agent leads, its sync acked", agent)
        # Cut the link just after the agent's next long poll reached the service: the work
        # submitted now is handed out in that poll's answer, which the proxy holds.
        proxy.hold_after(b"/agent/work ")
        assert proxy.triggered.wait(POLL + 10), "no poll came"
        name = submit(alice, "team", spec("w", gpus=1))
        pod = f"{name}-g-t0"
        wait_until(lambda: proxy.held_for_agent > 0 and AgentWork.objects.filter(
            kind="create").exists(), 10, "the work handed out in the held answer", agent)
        renewed = AgentLease.objects.get(backend="east").renewed_at
        # Past the service's lease (and so past the agent's renew deadline, 2/3 of it).
        wait_until(lambda: (timezone.now() - renewed).total_seconds() > LEASE + 1, LEASE + 5,
                   "the lease ended")
        mark = len(agent.log.read_text(errors="replace"))
        proxy.release_answers()  # the work reaches the agent; its API server is there
        wait_until(lambda: proxy.held_for_agent == 0, 10, "the answer delivered", agent)
        quiet_until = time.monotonic() + 5
        while time.monotonic() < quiet_until:
            assert (cluster.names("pods"), cluster.names("podgroups")) == ([], []), \
                f"created past its lease:\n{agent.log_tail()}"
            time.sleep(0.2)
        assert "the lease may have ended" in agent_log_after(agent, mark)  # it fenced itself
        assert agent.process.poll() is None

        proxy.heal()  # it hears 409 agent_not_leader, registers (leads again), re-lists
        wait_until(lambda: cluster.names("pods") == [pod], 30, "the pod, once it leads again",
                   agent)
        log = agent_log_after(agent, mark)
        assert "leads no more" in log
        assert log.index("leads no more") < log.rindex(": registered (")
        lease = AgentLease.objects.get(backend="east")
        assert (lease.holder, lease.transitions) == (agent.identity, 0)
        wait_until(lambda: not AgentWork.objects.filter(acked_at__isnull=True).exists(), 30,
                   "the create acked", agent)
        assert cluster.names("pods") == [pod]
    finally:
        agent.stop()
        proxy.close()
