"""The login pages (/accounts/login/ and /admin/login/) with a limit on failed logins.

Every attempt is counted before its password is checked, per client address and per user
name (sessions_app/counters.py: counted and compared in one step, so attempts arriving
together cannot pass together); a right password takes its count back. Past
CTXWEB_LOGIN_FAILURE_LIMIT in CTXWEB_AUTH_FAILURE_WINDOW_SECONDS, the password is not
checked at all, the right one included (a right password let through would tell a guesser
it is right, so the limit would bound nothing): the login page with a plain message, status
429 and Retry-After (docs/deployment.md#throttles).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse

from ..auth import client_id
from ..counters import count, uncount

__all__ = ["ThrottledAdminLoginForm", "ThrottledLoginForm", "ThrottledLoginView", "admin_login"]


def _limit() -> int:
    return int(getattr(settings, "CTXWEB_LOGIN_FAILURE_LIMIT", 10))


def _window() -> int:
    return int(getattr(settings, "CTXWEB_AUTH_FAILURE_WINDOW_SECONDS", 300))


def _digest(value: str) -> str:
    # Counter keys of a bounded length and alphabet, whatever was typed.
    return hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:32]


def login_keys(request: HttpRequest | None, username: str) -> list[str]:
    """The counters a login attempt raises: its address's and its user name's (casefolded:
    `Root` and `root` share one, whichever the database compares)."""
    address = client_id(request) if request is not None else "unknown"
    return [
        f"ctxweb:login-failures:addr:{_digest(address)}",
        f"ctxweb:login-failures:user:{_digest(username.casefold())}",
    ]


class _Throttled:
    """The counting around AuthenticationForm.clean (a mixin of the two login forms)."""

    request: HttpRequest | None
    cleaned_data: dict[str, Any]
    #: Seconds until a throttled attempt may be made again; None when not throttled.
    retry_after: int | None = None

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        if not username or not self.cleaned_data.get("password"):
            return super().clean()  # type: ignore[misc, no-any-return]
        keys = login_keys(self.request, str(username))
        counted = count(keys, _window())
        if counted.value > _limit():
            self.retry_after = counted.retry_after
            minutes = math.ceil(counted.retry_after / 60)
            raise forms.ValidationError(
                "Too many failed logins from this address or for this user. "
                f"Try again in {minutes} minute{'s' if minutes != 1 else ''}.",
                code="throttled",
            )
        cleaned: dict[str, Any] = super().clean()  # type: ignore[misc]
        uncount(keys)  # a right password: only failures count
        return cleaned


class ThrottledLoginForm(_Throttled, AuthenticationForm):
    """Django's login form, with the limit on failed logins."""


class ThrottledAdminLoginForm(_Throttled, AdminAuthenticationForm):
    """The admin's login form, with the limit on failed logins."""


def _as_throttled(response: HttpResponse, form: Any) -> HttpResponse:
    """`response` as 429 with Retry-After when `form` was refused for the limit."""
    retry_after = getattr(form, "retry_after", None)
    if retry_after is not None:
        response.status_code = 429
        response["Retry-After"] = str(retry_after)
    return response


class ThrottledLoginView(LoginView):
    """/accounts/login/: 429 while the limit holds."""

    authentication_form = ThrottledLoginForm

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        return _as_throttled(super().form_invalid(form), form)


def admin_login(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """/admin/login/: the admin's own login view (its form ThrottledAdminLoginForm, set in
    ctxweb/urls.py), 429 while the limit holds."""
    response = admin.site.login(request, extra_context)
    context = getattr(response, "context_data", None) or {}
    return _as_throttled(response, context.get("form"))
