"""The entry point of the scheduler's own process (``OSMO_PLACEMENT=osmo``, spawned by the
backend leader): nothing here touches the ORM before ``django.setup()``, so the spawned
interpreter can import it first."""

from __future__ import annotations

import os

from osmo import process_gc


def main(stop, parent: int, config: dict) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings")
    django.setup()
    from scheduler.backends.kubernetes.runner import placement_process

    process_gc.settle(busy=True)
    placement_process(stop, parent, config)
