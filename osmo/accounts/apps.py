from django.apps import AppConfig

# Every Django process loads the Celery app with its registry, so shared tasks bind to it.
import osmo.celery  # noqa: F401


class AccountsConfig(AppConfig):
    name = "osmo.accounts"
    label = "accounts"
    verbose_name = "Access tokens"
