from django.urls import path

from . import views

urlpatterns = [
    path("credentials", views.CredentialListView.as_view(), name="credential-list"),
    path("credentials/<str:name>", views.CredentialDetailView.as_view(),
         name="credential-detail"),
]
