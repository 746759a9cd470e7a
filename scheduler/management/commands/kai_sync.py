"""`manage.py kai_sync [--dry-run] [--namespace NS] [--kubeconfig PATH] [--context NAME]`.

Reconciles the KAI Queue hierarchy and the Topology of a namespace to the cluster of the
kubeconfig (or the in-cluster service account). ``--dry-run`` lists, compares and prints the
plan without writing. Runs whether or not ``OSMO_KAI_SYNC`` is on: asking is consent.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from scheduler.backends.spec import default_spec
from scheduler.kai.sync import KaiSyncError, custom_objects_api, sync_namespace


class Command(BaseCommand):
    help = "Reconcile the KAI Queues and Topology to a Kubernetes cluster."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--dry-run", action="store_true",
                            help="Print the plan, change nothing.")
        parser.add_argument("--namespace", default=None,
                            help="OSMO namespace (default: the default backend's).")
        parser.add_argument("--kubeconfig", default=None, help="kubeconfig file.")
        parser.add_argument("--context", default=None, help="kubeconfig context.")

    def handle(self, *args, **options) -> None:
        namespace = options["namespace"] or default_spec().namespace
        try:
            api = custom_objects_api(kubeconfig=options["kubeconfig"],
                                     context=options["context"])
            summary = sync_namespace(namespace=namespace, api=api, dry_run=options["dry_run"])
        except KaiSyncError as exc:
            raise CommandError(f"kai sync failed: {exc}") from exc
        except Exception as exc:  # kubeconfig missing or unreadable
            if isinstance(exc, CommandError):
                raise
            raise CommandError(f"kai sync failed: {exc}") from exc
        verb = {"created": "create", "replaced": "replace", "deleted": "delete"}
        for action in ("created", "replaced", "deleted"):
            for key in getattr(summary, action):
                word = verb[action] if summary.dry_run else action
                self.stdout.write(f"{word} {key}")
        counts = summary.counts()
        prefix = "plan" if summary.dry_run else "done"
        self.stdout.write(f"{prefix}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
