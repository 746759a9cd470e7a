"""Routes outside /api/: the Kubernetes admission webhook. Include at the root:
``path("webhooks/", include("scheduler.api.webhook_urls"))``."""

from django.urls import path

from . import views

urlpatterns = [
    path("podgroups/validate", views.PodGroupAdmissionWebhookView.as_view(),
         name="webhook-podgroup-validate"),
]
