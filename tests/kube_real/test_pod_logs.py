"""Task logs and events on the real API server: ``pods/log`` is proxied by the API server to the
node's kubelet endpoint (our stand-in in ``kubelet_logs``), the backend copies a running pod's
new lines while someone reads them, archives a pod's log and Events when it ends, and the log
outlives the pod."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from osmo.embedded import free_port
from scheduler.backends.kubernetes.pod_logs import PodLogs
from tests.k8s.conftest import spec, statuses, submit
from workflows.models import TaskLogInterest

from .kubelet_logs import KubeletLogs
from .server import KubeError

pytestmark = pytest.mark.django_db

LINE = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[t0\] (.*)$")


@pytest.fixture
def kubelet_logs(tmp_path):
    server = KubeletLogs(tmp_path).start()
    yield server
    server.stop()


def texts(data: bytes | str) -> list[str]:
    text = data.decode() if isinstance(data, bytes) else data
    found = []
    for line in text.splitlines():
        match = LINE.match(line)
        assert match, line
        found.append(match[1])
    return found


def running_pod(backend, cluster, alice, kubelet_logs, apiserver, namespace) -> tuple[str, str,
                                                                                        object]:
    name = submit(alice, "team", spec("train", gpus=2))
    backend.dispatch()
    node = f"{namespace}-n1"
    cluster.add_node(node, gpus=8)
    kubelet_logs.serve_node(apiserver, node)
    pod = f"{name}-g-t0"
    container = cluster.get("pods", pod)["spec"]["containers"][0]["name"]
    log = kubelet_logs.container(namespace, pod, container)
    cluster.run(pod, node)
    backend.listen()
    assert statuses(alice, name) == ("RUNNING", ["RUNNING"])
    return name, pod, log


def test_a_running_pods_log_is_followed_through_pods_log(backend, cluster, alice, team,
                                                        kubelet_logs, apiserver, namespace):
    name, pod, log = running_pod(backend, cluster, alice, kubelet_logs, apiserver, namespace)
    log.write("epoch 1 loss 0.9", "epoch 2 loss 0.5")
    response = alice.get(f"/api/workflow/{name}/logs", {"task_name": "t0"})
    assert response.status_code == 200
    assert TaskLogInterest.objects.filter(task__name="t0").exists()  # the reader asked
    logs = PodLogs(backend.kube)
    assert logs.copy_wanted() == 2
    stream = iter(response.streaming_content)
    assert texts(next(c for c in stream if c)) == ["epoch 1 loss 0.9", "epoch 2 loss 0.5"]
    log.write("epoch 3 loss 0.2")  # the container keeps writing
    assert logs.copy_wanted() == 1
    assert texts(next(c for c in stream if c)) == ["epoch 3 loss 0.2"]  # polls yield b""
    assert logs.copy_wanted() == 0  # nothing new: nothing copied twice
    log.write("saved checkpoint")
    log.close()
    cluster.finish(pod, exit_code=0)
    backend.listen()  # the pod ended: the rest of its log is archived, then the task ends
    assert statuses(alice, name) == ("COMPLETED", ["COMPLETED"])
    assert texts(b"".join(stream)) == ["saved checkpoint"]
    first, *later = [r for r in kubelet_logs.requests if f"/{pod}/" in r]
    assert "timestamps=true" in first and "sinceTime" not in first
    assert all("sinceTime=" in r and "limitBytes=" in r for r in later)


def test_the_log_of_a_pod_deleted_before_anyone_read_it_is_kept(
        backend, cluster, alice, team, kubelet_logs, apiserver, namespace):
    name, pod, log = running_pod(backend, cluster, alice, kubelet_logs, apiserver, namespace)
    log.write("loading data", "Traceback (most recent call last):", "ValueError: bad shape")
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
    backend.listen()
    assert statuses(alice, name) == ("FAILED", ["FAILED"])
    backend.cleanup()
    if cluster.get("pods", pod) is not None:  # Terminating: the kubelet's final delete
        cluster.delete_pod(pod, final=True)
    assert cluster.get("pods", pod) is None  # gone, with its node's copy of the log
    log.lines.clear()
    logs = alice.get(f"/api/workflow/{name}/logs")
    assert texts(b"".join(logs.streaming_content)) == [
        "loading data", "Traceback (most recent call last):", "ValueError: bad shape"]
    errors = alice.get(f"/api/workflow/{name}/error_logs", {"task_name": "t0",
                                                            "last_n_lines": 1})
    assert texts(b"".join(errors.streaming_content)) == ["ValueError: bad shape"]
    events = b"".join(alice.get(f"/api/workflow/{name}/events",
                                {"task_name": "t0"}).streaming_content).decode().splitlines()
    stamps = [e.split(" [", 1)[0] for e in events]
    assert stamps == sorted(stamps)  # oldest first
    assert sorted(e.split(" ", 2)[2] for e in events) == sorted([  # whole-second times
        f"[{name}] Submitted: by alice to pool team at NORMAL priority, 2 GPU(s)",
        f"[{name}] Admitted: within the quota of pool team; 1 group(s) queued",
        f"[t0] Running: on node {namespace}-n1",
        '[t0] Pulled: Successfully pulled image "nvcr.io/x:1" (kubelet)',
        "[t0] Failed: exit code 1"])


def test_a_pod_without_a_log_yet_changes_nothing(
        backend, cluster, alice, team, kubelet_logs, apiserver, namespace):
    name, pod, log = running_pod(backend, cluster, alice, kubelet_logs, apiserver, namespace)
    kubelet_logs.logs.clear()  # the kubelet knows no such container yet: 404 through the proxy
    alice.get(f"/api/workflow/{name}/logs", {"follow": "false"})
    assert PodLogs(backend.kube).copy_wanted() == 0
    body = alice.get(f"/api/workflow/{name}/logs", {"follow": "false"})
    assert b"".join(body.streaming_content) == b""


def test_an_unreachable_kubelet_keeps_the_stored_log_and_the_task_ends(
        backend, cluster, alice, team, kubelet_logs, apiserver, namespace, caplog):
    name, pod, log = running_pod(backend, cluster, alice, kubelet_logs, apiserver, namespace)
    log.write("before the outage")
    alice.get(f"/api/workflow/{name}/logs", {"follow": "false"})
    logs = PodLogs(backend.kube)
    assert logs.copy_wanted() == 1
    closed = free_port()  # nothing listens there: the API server's dial is refused
    apiserver.request("PATCH", f"/api/v1/nodes/{namespace}-n1/status", {"status": {
        "daemonEndpoints": {"kubeletEndpoint": {"Port": closed}}}},
        content_type="application/merge-patch+json")
    with pytest.raises(KubeError) as refused:
        apiserver.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}/log")
    assert refused.value.status == 500
    assert f"dial tcp 127.0.0.1:{closed}: connect: connection refused" in str(refused.value)
    log.write("during the outage")
    assert logs.copy_wanted() == 0
    assert [r.getMessage() for r in caplog.records if "reading the log" in r.getMessage()] \
        and all(f":{closed}: connect: connection refused" in r.getMessage()
                for r in caplog.records if "reading the log" in r.getMessage())
    cluster.finish(pod, exit_code=0)
    backend.listen()  # the archive read fails too; the task's status is written all the same
    assert statuses(alice, name) == ("COMPLETED", ["COMPLETED"])
    assert any("archiving the log" in r.getMessage() and "connection refused" in r.getMessage()
               for r in caplog.records)
    body = alice.get(f"/api/workflow/{name}/logs", {"follow": "false"})
    assert texts(b"".join(body.streaming_content)) == ["before the outage"]
