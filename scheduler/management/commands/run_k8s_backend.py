"""`manage.py run_k8s_backend [--backend NAME] [--interval S] [--kubeconfig PATH]`: one
Kubernetes backend (default `default`, the cluster the settings describe).

Dispatches runnable workflow groups to the cluster as KAI PodGroups and pods, watches the pods
back into task statuses, cleans up ended groups and keeps the node inventory. One instance is
active at a time (PostgreSQL advisory lock); others wait and take over. See
:mod:`scheduler.backends.kubernetes.runner`.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from osmo import process_gc
from osmo.observability.server import serve_if_configured
from scheduler.backends.kubernetes.client import api_client
from scheduler.backends.kubernetes.runner import BackendRunner
from scheduler.backends.spec import spec_for
from scheduler.core.kai_names import DEFAULT_BACKEND


class Command(BaseCommand):
    help = ("Run one Kubernetes cluster backend: dispatch its pools' PodGroups and pods, "
            "watch pod status, clean up, sync nodes.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--backend", default=DEFAULT_BACKEND,
                            help="The backend to serve (default: default).")
        parser.add_argument("--interval", type=float, default=None,
                            help="Seconds between passes (default: the backend's).")
        parser.add_argument("--kubeconfig", default=None,
                            help="kubeconfig file (default OSMO_KAI_KUBECONFIG, KUBECONFIG, "
                                 "~/.kube/config, else in-cluster).")

    def handle(self, *args, backend, interval, kubeconfig, **options) -> None:
        try:
            spec = spec_for(backend)
        except LookupError as exc:
            raise CommandError(str(exc)) from exc
        if not spec.is_kubernetes:
            raise CommandError(f"backend '{spec.name}' is not a Kubernetes one: an embedded "
                               "cluster needs no backend process (run_scheduler places its "
                               "pods).")
        kubeconfig = kubeconfig or spec.kubeconfig
        try:
            api_client(kubeconfig=kubeconfig).close()  # fail fast on a missing kubeconfig
        except Exception as exc:  # noqa: BLE001 - any configuration error
            raise CommandError(f"cannot configure the Kubernetes client: {exc}") from exc
        serve_if_configured()
        process_gc.settle(busy=True)
        BackendRunner(interval=interval, client_factory=lambda: api_client(kubeconfig=kubeconfig),
                      placement_process=True, kubeconfig=kubeconfig, spec=spec).run()
