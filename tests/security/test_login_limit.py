"""The login pages limit failed logins per client address and per user name (issue 30
item 4): 40 wrong superuser passwords used to answer 200 each.

Past the limit the page answers 429 with a plain message and Retry-After, and no password
is checked, the right one included (sessions_app/views/login.py says why); under the limit,
for other users and addresses, and once the window ends, the right password logs in.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from sessions_app.models import RateCounter

LIMIT = 10
PASSWORD = "the-right-password-4821"
LOGIN = "/accounts/login/"


@pytest.fixture(params=["memory", "database"])
def root(request: pytest.FixtureRequest, db: Any, settings: Any) -> Any:
    """A superuser; the counts in per-process memory, or in the database's table (with the
    database cache)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.CTXWEB_LOGIN_FAILURE_LIMIT = LIMIT
    if request.param == "database":
        settings.CACHES = {
            "default": {
                "BACKEND": "django.core.cache.backends.db.DatabaseCache",
                "LOCATION": "ctxweb_cache",
            }
        }
    return get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)


def _login(password: str, *, username: str = "root", address: str = "198.51.100.7") -> Any:
    data = {"username": username, "password": password}
    return Client(REMOTE_ADDR=address).post(LOGIN, data)


def _end_the_window() -> None:
    cache.clear()
    RateCounter.objects.update(expires_at=timezone.now() - timedelta(seconds=1))


def test_wrong_passwords_are_throttled_and_the_right_one_works_again_later(root: Any) -> None:
    answers = [_login(f"guess-{n}") for n in range(40)]

    assert [a.status_code for a in answers] == [200] * LIMIT + [429] * (40 - LIMIT)
    throttled = answers[-1]
    assert "Too many failed logins" in throttled.content.decode()
    assert 0 < int(throttled["Retry-After"]) <= 300
    assert "_auth_user_id" not in throttled.client.session
    # Not checked while throttled, the right password included.
    assert _login(PASSWORD).status_code == 429
    assert _login(PASSWORD, address="203.0.113.9").status_code == 429, "per user name"

    _end_the_window()
    assert _login(PASSWORD).status_code == 302


def test_the_limit_is_per_address_too(root: Any) -> None:
    for n in range(LIMIT):
        assert _login("wrong", username=f"user{n}").status_code == 200

    assert _login(PASSWORD).status_code == 429, "the same address, another user name"
    assert _login(PASSWORD, address="203.0.113.9").status_code == 302, "another address"


def test_right_passwords_are_not_counted(root: Any) -> None:
    assert _login("a typo").status_code == 200
    for _ in range(3 * LIMIT):
        assert _login(PASSWORD).status_code == 302
    for _ in range(LIMIT - 1):
        assert _login("wrong").status_code == 200
    assert _login("wrong").status_code == 429


def test_the_admin_login_is_throttled_too(root: Any) -> None:
    browser = Client(REMOTE_ADDR="198.51.100.8")
    data = {"username": "root", "password": "wrong", "next": "/admin/"}
    answers = [browser.post("/admin/login/", data).status_code for _ in range(LIMIT + 2)]

    assert answers == [200] * LIMIT + [429] * 2
    _end_the_window()
    right = browser.post("/admin/login/", {**data, "password": PASSWORD})
    assert right.status_code == 302
    assert browser.get("/admin/").status_code == 200
