"""Routes under /api/ (included by osmo/urls.py)."""

from django.urls import path

from . import views

urlpatterns = [
    path("kai/queues", views.KaiQueuesView.as_view(), name="kai-queues"),
    path("kai/podgroups/validate", views.PodGroupValidateView.as_view(),
         name="kai-podgroup-validate"),
]
