"""The dial-out agent on a real API server: it serves backend `east` from its own process
(no database settings in its environment), under the least-privilege RBAC of
deploy/kubernetes/agent, talking to the service over HTTP (the live server). The test plays
KAI and the kubelet (it binds and runs the pods), as the rest of this tier does."""

from __future__ import annotations

import datetime as dt
import random
import threading
import time

import pytest
import yaml

from osmo.accounts import services as accounts
from scheduler.backends import services as backend_services
from scheduler.models import AgentMessage, AgentWork, Backend, Node
from tests import factories
from tests.conftest import make_client
from tests.k8s.conftest import spec, statuses, submit
from workflows.models import Task, TaskEvent, TaskLogInterest

from .agent import (
    AgentProcess,
    ForkedAgents,
    agent_documents,
    agent_kubeconfig,
    install_agent_rbac,
    wait_until,
)
from .conftest import Cluster
from .kubelet_logs import KubeletLogs

pytestmark = pytest.mark.timeout(240)


def agent_of(apiserver, live_server, tmp_path, name: str, *groups: str) -> AgentProcess:
    user = accounts.user_ensure(username=f"agent-{name}-{len(groups)}",
                                groups=list(groups or (f"osmo-backend-{name}",)))
    return AgentProcess(url=live_server.url, token=accounts.token_issue(user=user), name=name,
                        kubeconfig=agent_kubeconfig(apiserver, tmp_path / f"{name}.kubeconfig"),
                        log=tmp_path / f"agent-{name}.log")


@pytest.fixture
def east(apiserver, k8s_settings, namespace, transactional_db, live_server, tmp_path):
    install_agent_rbac(apiserver, namespace)
    backend_services.backend_upsert(name="east", kind="kubernetes", k8s_namespace=namespace)
    agent = agent_of(apiserver, live_server, tmp_path, "east")
    yield agent
    agent.stop()


def kube_system_uid(apiserver) -> str:
    return apiserver.request("GET", "/api/v1/namespaces/kube-system")["metadata"]["uid"]


def east_nodes() -> list[str]:
    return sorted(Node.objects.filter(backend="east").values_list("name", flat=True))


def task_history(workflow: str) -> dict[str, list[str]]:
    """Each task's events by reason, in order."""
    tasks = dict(Task.objects.filter(workflow__name=workflow).values_list("id", "name"))
    history: dict[str, list[str]] = {name: [] for name in tasks.values()}
    for task_id, reason in TaskEvent.objects.filter(task_id__in=list(tasks)).order_by(
            "at", "id").values_list("task_id", "reason"):
        history[tasks[task_id]].append(reason)
    return history


def test_the_agent_registers_its_cluster_and_mirrors_its_nodes(east, cluster, apiserver,
                                                              admin):
    cluster.add_node("east-n1", gpus=8)
    east.start()
    wait_until(lambda: east_nodes() == ["east-n1"], 30, "the node mirrored", east)
    backend = Backend.objects.get(name="east")
    assert backend.k8s_uid == kube_system_uid(apiserver)
    assert backend.version.startswith("v1.25")
    body = admin.get("/api/configs/backend/east").json()
    assert (body["status"], body["nodes"], body["gpus"]) == ("ONLINE", 1, 8)
    # KAI placement: the tier's cluster has KAI's CRDs and the OSMO PriorityClasses.
    wait_until(lambda: admin.get("/api/health").json()["backends"]["east"]["placement"] == {
        "ok": True, "missing": []}, 30, "the placement's readiness reported", east)


def test_another_cluster_under_the_name_is_refused_and_changes_nothing(east, cluster, admin):
    Backend.objects.filter(name="east").update(k8s_uid="the-uid-of-another-cluster")
    cluster.add_node("east-n1", gpus=8)
    before = Backend.objects.filter(name="east").values().get()
    assert east.start().wait(timeout=60) == 3
    assert "backend_identity_mismatch" in east.log.read_text()
    assert Backend.objects.filter(name="east").values().get() == before
    assert east_nodes() == [] and AgentWork.objects.count() == 0


def test_a_token_of_another_backend_is_refused_and_changes_nothing(east, apiserver,
                                                                   live_server, tmp_path):
    backend_services.backend_upsert(name="west", kind="kubernetes")
    impostor = agent_of(apiserver, live_server, tmp_path, "east", "osmo-backend-west")
    before = Backend.objects.filter(name="east").values().get()
    assert impostor.start().wait(timeout=60) == 3
    assert "403 forbidden" in impostor.log.read_text()
    assert Backend.objects.filter(name="east").values().get() == before


def test_a_workflow_runs_through_the_agent(east, cluster, alice, namespace):
    cluster.add_node("east-n1", gpus=8)
    factories.pool("team", 64, backends=["east"])
    east.start()
    wait_until(lambda: east_nodes() == ["east-n1"], 30, "the node mirrored", east)
    name = submit(alice, "team", spec("train", gpus=2, tasks=2))
    pods = [f"{name}-g-t0", f"{name}-g-t1"]
    wait_until(lambda: cluster.names("pods") == pods, 30, "the agent's pods", east)
    podgroup = cluster.get("podgroups", f"{name}-g")
    assert podgroup["spec"]["queue"] in cluster.queues()  # the agent synced the Queues first
    assert cluster.get("pods", pods[0])["spec"]["schedulerName"] == "kai-scheduler"
    for pod in pods:
        cluster.run(pod, "east-n1")
    wait_until(lambda: statuses(alice, name) == ("RUNNING", ["RUNNING", "RUNNING"]), 30,
               "RUNNING reported", east)
    cluster.finish(pods[1])  # not the lead first: the lead's end would end the others
    wait_until(lambda: statuses(alice, name) == ("RUNNING", ["RUNNING", "COMPLETED"]), 30,
               "one end reported", east)
    cluster.finish(pods[0], exit_code=3)
    wait_until(lambda: statuses(alice, name)[0] == "FAILED", 30, "the end reported", east)
    tasks = {t.name: (t.status, t.exit_code, t.node_name)
             for t in Task.objects.filter(workflow__name=name)}
    assert tasks == {"t0": ("FAILED", 3, "east-n1"), "t1": ("COMPLETED", 0, "east-n1")}
    assert alice.get(f"/api/workflow/{name}").json()["groups"][0]["backend"] == "east"
    # The ended group's objects leave: delete work the agent applied.
    wait_until(lambda: cluster.names("pods") == [] and cluster.names("podgroups") == [], 30,
               "the group's objects deleted", east)


@pytest.fixture
def kubelet_logs(tmp_path):
    server = KubeletLogs(tmp_path).start()
    yield server
    server.stop()


def running_with_log(east, cluster, alice, apiserver, namespace, kubelet_logs):
    """A one-task workflow running through the agent on a node whose kubelet serves its log:
    (workflow, pod, the container's log)."""
    cluster.add_node("east-n1", gpus=8)
    kubelet_logs.serve_node(apiserver, "east-n1")
    factories.pool("team", 64, backends=["east"])
    east.start()
    name = submit(alice, "team", spec("train", gpus=1))
    pod = f"{name}-g-t0"
    wait_until(lambda: cluster.names("pods") == [pod], 30, "the agent's pod", east)
    container = cluster.get("pods", pod)["spec"]["containers"][0]["name"]
    log = kubelet_logs.container(namespace, pod, container)
    cluster.run(pod, "east-n1")
    wait_until(lambda: statuses(alice, name) == ("RUNNING", ["RUNNING"]), 30, "RUNNING", east)
    return name, pod, log


def test_an_ending_pods_log_and_events_reach_the_service_through_the_agent(
        east, cluster, alice, apiserver, namespace, kubelet_logs):
    """A 3 MiB log (several reads, a message each: none grows with the log) and the pod's
    Events are kept before the task ends, each line once and in order."""
    name, pod, log = running_with_log(east, cluster, alice, apiserver, namespace,
                                      kubelet_logs)
    written = [f"step {i:05d} " + "x" * 90 for i in range(30_000)]  # 3 MiB with stamps
    log.write(*written)
    log.close()
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    apiserver.request("POST", f"/api/v1/namespaces/{namespace}/events", {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{pod}.pulled", "namespace": namespace},
        "involvedObject": {"kind": "Pod", "name": pod, "namespace": namespace},
        "reason": "Pulled", "message": 'Successfully pulled image "nvcr.io/x:1"',
        "source": {"component": "kubelet"}, "type": "Normal", "count": 1,
        "firstTimestamp": now, "lastTimestamp": now})
    cluster.finish(pod, exit_code=1)
    wait_until(lambda: statuses(alice, name) == ("FAILED", ["FAILED"]), 60, "FAILED", east)
    logs = b"".join(alice.get(f"/api/workflow/{name}/logs",
                              {"follow": "false"}).streaming_content).decode()
    assert [line.split("[t0] ", 1)[1] for line in logs.splitlines()] == written
    events = b"".join(alice.get(f"/api/workflow/{name}/events",
                                {"task_name": "t0"}).streaming_content).decode()
    assert '[t0] Pulled: Successfully pulled image "nvcr.io/x:1" (kubelet)' in events
    assert events.count("Pulled") == 1
    messages = AgentMessage.objects.filter(backend="east", type="pod_logs").count()
    assert messages >= 7  # 3 MiB in reads of 512 KiB, then the Events
    # Deleted after it ended (the cleaner): its log is not read or kept again.
    wait_until(lambda: cluster.names("pods") == [], 30, "the pod deleted", east)
    assert b"".join(alice.get(f"/api/workflow/{name}/logs", {"follow": "false"})
                    .streaming_content).decode() == logs


def stored_log(client, name: str) -> list[str]:
    text = b"".join(client.get(f"/api/workflow/{name}/logs", {"follow": "false"})
                    .streaming_content).decode()
    return [line.split("[t0] ", 1)[1] for line in text.splitlines()]


def test_a_running_pods_log_reaches_its_reader_through_the_agent(
        east, cluster, alice, apiserver, namespace, kubelet_logs):
    """While someone follows a running task's log, the agent sends its new lines (the poll
    names the pod); each line is kept once, and the rest comes when the pod ends."""
    name, pod, log = running_with_log(east, cluster, alice, apiserver, namespace,
                                      kubelet_logs)
    log.write("epoch 1 loss 0.9", "epoch 2 loss 0.5")
    time.sleep(3)
    assert not kubelet_logs.requests  # nobody reads it: the agent reads nothing
    follow = alice.get(f"/api/workflow/{name}/logs", {"task_name": "t0"})
    assert follow.status_code == 200
    assert TaskLogInterest.objects.filter(task__workflow__name=name).exists()
    wait_until(lambda: stored_log(alice, name) == ["epoch 1 loss 0.9", "epoch 2 loss 0.5"],
               30, "the live lines", east)
    log.write("epoch 3 loss 0.2")  # the container keeps writing
    wait_until(lambda: stored_log(alice, name)[2:] == ["epoch 3 loss 0.2"], 30,
               "the next live line", east)
    time.sleep(5)  # more follow rounds: nothing is kept twice
    assert stored_log(alice, name) == ["epoch 1 loss 0.9", "epoch 2 loss 0.5",
                                       "epoch 3 loss 0.2"]
    reads = [r for r in kubelet_logs.requests if f"/{pod}/" in r]
    assert len(reads) >= 3 and all("limitBytes=" in r for r in reads)
    assert all("sinceTime=" in r for r in reads[1:])  # resumed where the copy ends
    log.write("saved checkpoint")
    log.close()
    cluster.finish(pod, exit_code=0)
    wait_until(lambda: statuses(alice, name) == ("COMPLETED", ["COMPLETED"]), 60,
               "COMPLETED", east)
    assert stored_log(alice, name) == ["epoch 1 loss 0.9", "epoch 2 loss 0.5",
                                       "epoch 3 loss 0.2", "saved checkpoint"]
    follow.close()


def test_a_relist_after_a_reconnect_removes_what_went_while_the_agent_was_away(
        east, cluster, alice):
    for node in ("east-n1", "east-n2"):
        cluster.add_node(node, gpus=8)
    factories.pool("team", 64, backends=["east"])
    east.start()
    wait_until(lambda: east_nodes() == ["east-n1", "east-n2"], 30, "the nodes mirrored", east)
    name = submit(alice, "team", spec("train", gpus=1, tasks=2))
    pods = [f"{name}-g-t0", f"{name}-g-t1"]
    wait_until(lambda: cluster.names("pods") == pods, 30, "the agent's pods", east)
    for pod in pods:
        cluster.run(pod, "east-n1")
    wait_until(lambda: statuses(alice, name) == ("RUNNING", ["RUNNING", "RUNNING"]), 30,
               "RUNNING reported", east)
    east.kill()
    cluster.delete_node("east-n2")  # while nobody watched
    cluster.delete_pod(pods[1], final=True)
    assert east_nodes() == ["east-n1", "east-n2"]  # nobody told the service yet
    east.start()
    wait_until(lambda: east_nodes() == ["east-n1"], 30, "the node gone from the mirror", east)
    wait_until(lambda: Task.objects.get(workflow__name=name, name="t1").status ==
               "FAILED_EVICTED", 30, "the task whose pod went ended", east)
    assert Task.objects.get(workflow__name=name, name="t1").reason == "pod_deleted"


# 100 lives take ~75 s here (each ~0.45 s to register on a loaded 2-core machine, then
# killed within 0.3 s): 60 keep the test near a minute.
RESTARTS = 100


def test_killed_and_restarted_mid_stream_every_transition_is_recorded_once(
        east, cluster, alice):
    """The agent is killed (SIGKILL) and started again RESTARTS times while pods start and
    end one after the other; each transition waits for the service to have recorded the one
    before (a transition made and undone while no agent runs is seen by nobody)."""
    for node in ("east-n1", "east-n2"):
        cluster.add_node(node, gpus=8)
    factories.pool("team", 64, backends=["east"])
    names = [submit(alice, "team", spec(f"w{i}", gpus=1, tasks=3)) for i in range(4)]
    agents = ForkedAgents(east)
    rng = random.Random(45)
    done = threading.Event()

    def registrations() -> int:
        return east.log.read_text().count(": registered (") if east.log.exists() else 0

    def killer() -> None:
        for life in range(RESTARTS):
            agents.start()
            # Killed in the middle of the stream: once registered, at a random moment.
            deadline = time.monotonic() + 10
            while registrations() <= life and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.3))
            agents.kill()
        agents.start()  # the last one stays
        done.set()

    thread = threading.Thread(target=killer, daemon=True)
    started = time.monotonic()
    thread.start()
    try:
        def status(workflow: str, task: str) -> str:
            return Task.objects.get(workflow__name=workflow, name=task).status

        for index, name in enumerate(names):
            tasks = ["t0", "t1", "t2"]
            pods = [f"{name}-g-{t}" for t in tasks]
            wait_until(lambda pods=pods: set(pods) <= set(cluster.names("pods")), 90,
                       f"the pods of {name}", east)
            node = f"east-n{index % 2 + 1}"
            for task, pod in zip(tasks, pods, strict=True):
                cluster.bind(pod, node)
                wait_until(lambda t=task, n=name, at=node: Task.objects.get(
                    workflow__name=n, name=t).node_name == at, 90, f"{name}/{task} bound",
                    east)
                cluster.run(pod)
                wait_until(lambda t=task, n=name: status(n, t) == "RUNNING", 90,
                           f"{name}/{task} RUNNING", east)
            for task, pod in reversed(list(zip(tasks, pods, strict=True))):  # the lead last
                cluster.finish(pod)
                wait_until(lambda t=task, n=name: status(n, t) == "COMPLETED", 90,
                           f"{name}/{task} COMPLETED", east)
    finally:
        thread.join(timeout=120)
        agents.close()
    elapsed = time.monotonic() - started
    assert done.is_set() and agents.starts == RESTARTS + 1
    histories = {name: task_history(name) for name in names}
    expected = {name: {t: ["Bound", "Running", "Completed"]
                       for t in ("t0", "t1", "t2")} for name in names}
    assert histories == expected, f"after {elapsed:.0f} s"
    registered = registrations()
    assert registered >= RESTARTS  # every killed life was killed after it had registered
    print(f"{RESTARTS} restarts in {elapsed:.1f} s, {registered} registered")


def test_the_agent_manifest_is_accepted_and_its_rbac_is_exact(apiserver, namespace, tmp_path):
    """deploy/kubernetes/agent as the server takes it (server-side dry run for the Deployment
    and the Secret), and the agent's token holds exactly the rules it ships: the cluster's
    SelfSubjectRulesReview in the backend's namespace, less what every user holds."""
    install_agent_rbac(apiserver, namespace)
    docs = agent_documents()
    assert {d["kind"] for d in docs} == {"ServiceAccount", "Secret", "ClusterRole",
                                         "ClusterRoleBinding", "Role", "RoleBinding",
                                         "Deployment"}
    for doc in docs:
        apiserver.create(doc, dry_run=True, exist_ok=True)
    token = yaml.safe_load(agent_kubeconfig(apiserver, tmp_path / "k").read_text())[
        "users"][0]["user"]["token"]
    review = apiserver.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                               {"apiVersion": "authorization.k8s.io/v1",
                                "kind": "SelfSubjectRulesReview",
                                "spec": {"namespace": namespace}}, token=token)
    granted = {(group, resource, name, verb)
               for rule in review["status"]["resourceRules"]
               for group in rule.get("apiGroups", [])
               for resource in rule.get("resources", [])
               for name in rule.get("resourceNames") or [""]
               for verb in rule["verbs"]
               if not resource.startswith("selfsubject")}  # every user may ask these
    shipped = {(group, resource, name, verb)
               for doc in docs if doc["kind"] in ("ClusterRole", "Role")
               for rule in doc["rules"]
               for group in rule["apiGroups"] for resource in rule["resources"]
               for name in rule.get("resourceNames") or [""] for verb in rule["verbs"]}
    assert granted == shipped
    assert ("", "namespaces", "kube-system", "get") in granted
    assert not any(r == "nodes" and v in ("delete", "patch", "update") for _, r, _, v in granted)
    assert ("", "secrets", "", "get") not in granted  # it never reads a Secret by name


@pytest.fixture(scope="module")
def second_apiserver(apiserver, tmp_path_factory):
    """Another cluster: its own kube-apiserver and etcd (another kube-system UID)."""
    from .conftest import served
    from .server import ApiServer

    yield from served(ApiServer(tmp_path_factory.mktemp("kube-apiserver-2")))


def test_two_clusters_each_with_its_agent_each_run_their_pools_work(
        east, second_apiserver, apiserver, cluster, namespace, alice, live_server, tmp_path):
    second_apiserver.namespace(namespace)  # the same namespace name: the Queues' names
    install_agent_rbac(second_apiserver, namespace)
    backend_services.backend_upsert(name="west", kind="kubernetes", k8s_namespace=namespace)
    west = agent_of(second_apiserver, live_server, tmp_path, "west")
    other = Cluster(second_apiserver, namespace)
    cluster.add_node("east-n1", gpus=8)
    other.add_node("west-n1", gpus=8)
    factories.pool("team", 64, backends=["east"])
    factories.pool("lab", 64, backends=["west"])
    bob = make_client("bob", "osmo-lab-user")
    try:
        east.start()
        west.start()
        wait_until(lambda: sorted(Node.objects.values_list("name", "backend")) == [
            ("east-n1", "east"), ("west-n1", "west")], 30, "both mirrors", west)
        uids = dict(Backend.objects.filter(name__in=["east", "west"])
                    .values_list("name", "k8s_uid"))
        assert uids == {"east": kube_system_uid(apiserver),
                        "west": kube_system_uid(second_apiserver)}
        assert uids["east"] != uids["west"]
        a = submit(alice, "team", spec("a", gpus=1))
        b = submit(bob, "lab", spec("b", gpus=1))
        wait_until(lambda: cluster.names("pods") == [f"{a}-g-t0"], 30, "east's pod", east)
        wait_until(lambda: other.names("pods") == [f"{b}-g-t0"], 30, "west's pod", west)
        cluster.run(f"{a}-g-t0", "east-n1")
        other.run(f"{b}-g-t0", "west-n1")
        wait_until(lambda: statuses(alice, a) == ("RUNNING", ["RUNNING"])
                   and statuses(bob, b) == ("RUNNING", ["RUNNING"]), 30, "both RUNNING", west)
        nodes = dict(Task.objects.values_list("workflow__name", "node_name"))
        assert nodes == {a: "east-n1", b: "west-n1"}
        assert cluster.names("pods") == [f"{a}-g-t0"]  # never a pod in the other cluster
        assert other.names("pods") == [f"{b}-g-t0"]
    finally:
        west.stop()
        second_apiserver.request("DELETE", f"/api/v1/namespaces/{namespace}/pods",
                                 query=[("gracePeriodSeconds", "0")])
        other.delete_node("west-n1")
