"""The hot-path calls (``client.call``, on libcurl) against the real API server: one thread's
handle carries POST, GET, PATCH and DELETE in turn, each with only its own body; errors come
back as the official client raises them; no answer at all is a transient ``OSError``."""

from __future__ import annotations

import socket
import threading

import pytest
from kubernetes.client.exceptions import ApiException

from scheduler.backends.kubernetes.client import Kube, api_errors, call, call_raw, is_transient


def _config_map(name: str, namespace: str, size: int) -> dict:
    # Over 1 KiB: libcurl would otherwise ask for a 100 Continue first.
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": {"blob": "x" * size}}


def test_one_handle_carries_each_verb_with_its_own_body(apiserver, namespace):
    kube = Kube(apiserver.admin_client())
    path = f"/api/v1/namespaces/{namespace}/services"
    try:
        created = call(kube, "POST", path, {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "one"},
            "spec": {"ports": [{"port": 80}], "clusterIP": "None"}})
        assert created["metadata"]["name"] == "one"
        # A GET right after a POST on the same handle sends no body and reads the object.
        got = call(kube, "GET", f"{path}/one")
        assert got["metadata"]["uid"] == created["metadata"]["uid"]
        patched = call(kube, "PATCH", f"{path}/one", {"metadata": {"labels": {"a": "b"}}},
                       content_type="application/merge-patch+json")
        assert patched["metadata"]["labels"] == {"a": "b"}
        listed = call(kube, "GET", f"{path}?labelSelector=a%3Db")
        assert [s["metadata"]["name"] for s in listed["items"]] == ["one"]
        call(kube, "DELETE", f"{path}/one")
        with pytest.raises(ApiException) as gone:
            call(kube, "GET", f"{path}/one")
        assert gone.value.status == 404 and gone.value.reason == "Not Found"
        assert '"reason":"NotFound"' in gone.value.body
    finally:
        kube.close()


def test_errors_are_the_clients_and_a_large_body_goes_at_once(apiserver, namespace):
    admin = Kube(apiserver.admin_client())
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    try:
        body = _config_map("big", namespace, 64 * 1024)
        assert call(admin, "POST", path, body)["data"]["blob"] == body["data"]["blob"]
        with pytest.raises(ApiException) as exists:
            call(admin, "POST", path, body)
        assert exists.value.status == 409 and not is_transient(exists.value)
        with pytest.raises(ApiException) as invalid:
            call(admin, "POST", path, {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": "Not_A_Name"}})
        assert invalid.value.status == 422
        assert call_raw(admin, "GET", f"{path}/big").startswith(b"{")
    finally:
        admin.close()


def test_threads_keep_their_own_handles(apiserver, namespace):
    kube = Kube(apiserver.admin_client())
    path = f"/api/v1/namespaces/{namespace}/services"
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for round_ in range(5):
                name = f"s{index}-{round_}"
                call(kube, "POST", path, {
                    "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                    "spec": {"ports": [{"port": 80}], "clusterIP": "None"}})
                assert call(kube, "GET", f"{path}/{name}")["metadata"]["name"] == name
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        names = sorted(s["metadata"]["name"] for s in call(kube, "GET", path)["items"])
        assert names == sorted(f"s{i}-{r}" for i in range(6) for r in range(5))
    finally:
        kube.close()


def test_no_answer_is_a_transient_os_error(apiserver):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    api = apiserver.backend_client()
    api.configuration.host = f"https://127.0.0.1:{port}"
    kube = Kube(api)
    try:
        with pytest.raises(ConnectionError) as refused:
            call(kube, "GET", "/api/v1/namespaces")
        assert isinstance(refused.value, api_errors()) and is_transient(refused.value)
    finally:
        kube.close()
    # A closed client's thread opens a new handle when it calls again.
    kube = Kube(apiserver.backend_client())
    kube.close()
    with pytest.raises(ApiException) as forbidden:
        call(kube, "GET", "/api/v1/namespaces")
    assert forbidden.value.status == 403
