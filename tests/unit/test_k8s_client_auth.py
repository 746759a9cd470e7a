"""The credentials headers of a request to the API server are asked of the client's
configuration (whose kubeconfig hook refreshes them) once a short window, not per request."""

from __future__ import annotations

from kubernetes import client

from scheduler.backends.kubernetes import client as kube_client


def test_credentials_are_asked_once_a_window_and_a_refreshed_token_is_sent_after_it(
        monkeypatch) -> None:
    configuration = client.Configuration(host="https://apiserver.invalid")
    configuration.api_key = {"authorization": "one"}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    refreshed = []
    configuration.refresh_api_key_hook = lambda conf: refreshed.append(conf)
    api = client.ApiClient(configuration)
    clock = [100.0]
    monkeypatch.setattr(kube_client.time, "monotonic", lambda: clock[0])

    first = kube_client._headers(api)
    posted = kube_client._headers(api, content_type="application/json")
    assert first == {"Accept": "application/json", "User-Agent": api.user_agent,
                     "authorization": "Bearer one"}
    assert posted == {**first, "Content-Type": "application/json"}
    assert len(refreshed) == 1

    configuration.api_key["authorization"] = "two"  # as the hook would after a rotation
    clock[0] += kube_client.AUTH_REUSE_SECONDS - 0.01
    assert kube_client._headers(api)["authorization"] == "Bearer one"
    assert len(refreshed) == 1
    clock[0] += 0.02
    assert kube_client._headers(api)["authorization"] == "Bearer two"
    assert len(refreshed) == 2
