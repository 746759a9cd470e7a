from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "osmo.accounts"
    label = "accounts"
    verbose_name = "Access tokens"
