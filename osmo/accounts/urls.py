"""Routes under /api/ for login tokens and profiles."""

from django.urls import path

from . import api

urlpatterns = [
    path("auth/jwt/access_token", api.AccessTokenExchangeView.as_view(),
         name="auth-access-token"),
    path("auth/access_token", api.AccessTokenListView.as_view(), name="access-tokens"),
    path("auth/access_token/<int:token_id>", api.AccessTokenDetailView.as_view(),
         name="access-token"),
]
