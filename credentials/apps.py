from django.apps import AppConfig


class CredentialsConfig(AppConfig):
    name = "credentials"
    verbose_name = "Credentials"
