from django.urls import path

from . import views

urlpatterns = [
    path("app", views.AppListView.as_view(), name="app-list"),
    path("app/user/<str:name>", views.AppDetailView.as_view(), name="app-detail"),
    path("app/user/<str:name>/spec", views.AppSpecView.as_view(), name="app-spec"),
    path("app/user/<str:name>/rename", views.AppRenameView.as_view(), name="app-rename"),
]
