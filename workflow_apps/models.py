"""An app (a name, its owner, a description) and its numbered versions (each a spec text)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class AppVersionStatus(models.TextChoices):
    READY = "READY"
    DELETED = "DELETED"


class App(models.Model):
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=63, unique=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                              related_name="workflow_apps")
    description = models.CharField(max_length=1024, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.name


class AppVersion(models.Model):
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    spec = models.TextField()  # emptied when the version is deleted
    status = models.CharField(max_length=8, choices=AppVersionStatus.choices,
                              default=AppVersionStatus.READY)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["app", "version"]
        constraints = [
            models.UniqueConstraint(fields=["app", "version"], name="app_version_unique",
                                    violation_error_message="That version exists already."),
            models.CheckConstraint(condition=models.Q(version__gte=1),
                                   name="app_version_from_one",
                                   violation_error_message="Versions count from 1."),
        ]

    def __str__(self) -> str:
        return f"{self.app_id}:{self.version}"
