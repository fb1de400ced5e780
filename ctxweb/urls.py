"""URL routes: the pages, the REST API under /api/, the proxy under /proxy/, the admin and
the login views."""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from ctxweb.api import api
from sessions_app.views.login import ThrottledAdminLoginForm, ThrottledLoginView, admin_login

# Both login pages limit failed logins (sessions_app/views/login.py).
admin.site.login_form = ThrottledAdminLoginForm

urlpatterns = [
    path("api/", api.urls),
    path("admin/login/", admin_login),
    path("admin/", admin.site.urls),
    path("proxy/", include("sessions_app.proxy.urls")),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("sessions_app.urls")),
    # Browsers ask every page's site for /favicon.ico (the admin's pages have no icon tag).
    path("favicon.ico", RedirectView.as_view(url=f"{settings.STATIC_URL}favicon.ico")),
]
