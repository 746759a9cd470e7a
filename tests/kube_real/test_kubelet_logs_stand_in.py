"""The log stand-in through the real API server's ``pods/log`` proxy honours what kubelet
honours: ``sinceSeconds`` keeps the last N seconds, ``previous`` reads the container's previous
instance (and, without one, kubelet's 400 comes back through the API server)."""

from __future__ import annotations

import datetime as dt

import pytest

from .kubelet_logs import KubeletLogs
from .osmo_placement import pod
from .server import KubeError


@pytest.fixture
def logged_pod(tmp_path, apiserver, cluster, namespace):
    server = KubeletLogs(tmp_path).start()
    node = f"{namespace}-logs"
    cluster.add_node(node, gpus=1)
    server.serve_node(apiserver, node)
    apiserver.create(pod(namespace, "talker", "none", "q", gpus=1))
    cluster.bind("talker", node)
    yield server.container(namespace, "talker")
    server.stop()


def read(apiserver, namespace: str, **query: str) -> str:
    return apiserver.request("GET", f"/api/v1/namespaces/{namespace}/pods/talker/log",
                             query=list(query.items()))


def test_since_seconds_keeps_the_last_seconds_only(logged_pod, apiserver, namespace) -> None:
    now = dt.datetime.now(dt.UTC)
    logged_pod.write("an hour ago", at=now - dt.timedelta(hours=1))
    logged_pod.write("a minute ago", at=now - dt.timedelta(minutes=1))
    logged_pod.write("now")
    assert read(apiserver, namespace, sinceSeconds="600") == "a minute ago\nnow\n"
    assert read(apiserver, namespace, sinceSeconds="10") == "now\n"
    assert read(apiserver, namespace) == "an hour ago\na minute ago\nnow\n"


def test_previous_reads_the_instance_before_the_restart(logged_pod, apiserver,
                                                        namespace) -> None:
    with pytest.raises(KubeError) as refused:
        read(apiserver, namespace, previous="true")
    assert refused.value.status == 400
    assert 'previous terminated container \\"main\\" in pod \\"talker\\" not found' in str(
        refused.value)
    logged_pod.write("first run")
    logged_pod.restart()
    logged_pod.write("second run")
    assert read(apiserver, namespace, previous="true") == "first run\n"
    assert read(apiserver, namespace) == "second run\n"
