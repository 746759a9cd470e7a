"""Today's configuration becomes one backend row named `default`, built from the settings that
chose the cluster (OSMO_CLUSTER_BACKEND, OSMO_NAMESPACE, OSMO_PLACEMENT, OSMO_SCHEDULER_NAME),
so an existing installation sees no change."""

from django.conf import settings
from django.db import migrations

DEFAULT_BACKEND = "default"


def default_backend_fields() -> dict:
    return {"kind": settings.OSMO_CLUSTER_BACKEND, "placement": settings.OSMO_PLACEMENT,
            "k8s_namespace": settings.OSMO_NAMESPACE,
            "scheduler_name": settings.OSMO_SCHEDULER_NAME}


def create_default(apps, schema_editor):
    Backend = apps.get_model("scheduler", "Backend")  # noqa: N806 - a model class
    Backend.objects.get_or_create(name=DEFAULT_BACKEND, defaults=default_backend_fields())


def remove_default(apps, schema_editor):
    apps.get_model("scheduler", "Backend").objects.filter(name=DEFAULT_BACKEND).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("scheduler", "0005_backends"),
    ]

    operations = [
        migrations.RunPython(create_default, remove_default),
    ]
