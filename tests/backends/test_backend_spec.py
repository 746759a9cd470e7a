"""A backend is a value: the `default` one as the settings describe it, any other from its
row; each its own leader lock; `run_k8s_backend --backend NAME` serves one."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from scheduler.backends.spec import (
    DEFAULT_K8S_LOCK,
    BackendSpec,
    default_spec,
    embedded_specs,
    leader_lock_key,
    spec_for,
)
from scheduler.models import Backend

pytestmark = pytest.mark.django_db


def test_the_default_backend_is_what_the_settings_say(settings):
    settings.OSMO_CLUSTER_BACKEND, settings.OSMO_PLACEMENT = "kubernetes", "osmo"
    settings.OSMO_NAMESPACE, settings.OSMO_SCHEDULER_NAME = "ns1", "sched1"
    settings.OSMO_KAI_KUBECONFIG, settings.OSMO_K8S_INTERVAL = "/k/config", 2.5
    settings.OSMO_K8S_RESYNC_INTERVAL, settings.OSMO_K8S_WATCH_TIMEOUT = 30.0, 40
    assert spec_for("default") == default_spec() == BackendSpec(
        name="default", kind="kubernetes", placement="osmo", namespace="ns1",
        scheduler_name="sched1", kubeconfig="/k/config", interval=2.5, resync_interval=30.0,
        watch_timeout=40)
    assert default_spec().places_pods and default_spec().leader_lock == DEFAULT_K8S_LOCK


def test_another_backend_is_its_row(settings):
    settings.OSMO_K8S_INTERVAL = 3.0
    Backend.objects.create(name="east", kind="kubernetes", placement="osmo",
                           k8s_namespace="gpu", scheduler_name="")
    east = spec_for("east")
    assert (east.name, east.kind, east.placement, east.namespace, east.scheduler_name,
            east.kubeconfig, east.interval) == ("east", "kubernetes", "osmo", "gpu",
                                                "osmo-scheduler", None, 3.0)
    with pytest.raises(LookupError):
        spec_for("nowhere")


def test_each_backend_has_a_leader_lock_of_its_own():
    keys = {name: leader_lock_key(name) for name in ("default", "east", "west", "a", "b")}
    assert keys["default"] == DEFAULT_K8S_LOCK
    assert len(set(keys.values())) == 5
    assert all(0 < key < 2 ** 63 for key in keys.values())  # a PostgreSQL bigint
    assert leader_lock_key("east") == keys["east"]  # the same in every process


def test_the_embedded_loop_runs_every_embedded_backend(settings):
    settings.OSMO_CLUSTER_BACKEND = "embedded"
    Backend.objects.create(name="lab", kind="embedded")
    Backend.objects.create(name="east", kind="kubernetes")
    assert [spec.name for spec in embedded_specs()] == ["default", "lab"]
    settings.OSMO_CLUSTER_BACKEND = "kubernetes"
    assert [spec.name for spec in embedded_specs()] == ["lab"]


def test_the_command_serves_only_a_known_kubernetes_backend(settings):
    settings.OSMO_CLUSTER_BACKEND = "kubernetes"
    with pytest.raises(CommandError, match="no backend named 'nowhere'"):
        call_command("run_k8s_backend", "--backend", "nowhere")
    Backend.objects.create(name="lab", kind="embedded")
    with pytest.raises(CommandError, match="backend 'lab' is not a Kubernetes one"):
        call_command("run_k8s_backend", "--backend", "lab")
