"""URL routes: the pages, the REST API under /api/, the proxy under /proxy/, the admin and
the login views."""

from django.contrib import admin
from django.urls import include, path

from ctxweb.api import api

urlpatterns = [
    path("api/", api.urls),
    path("admin/", admin.site.urls),
    path("proxy/", include("sessions_app.proxy.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("sessions_app.urls")),
]
