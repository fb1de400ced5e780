"""`manage.py create_api_key USERNAME`."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from sessions_app.models import ApiKey
from tests.sessions_app.conftest import JsonClient

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("create_api_key", *args, stdout=out)
    return out.getvalue()


def test_creates_the_user_and_prints_a_working_key_last() -> None:
    output = run("carol")
    key = output.strip().splitlines()[-1]
    user = get_user_model().objects.get(username="carol")
    assert not user.has_usable_password()
    assert ApiKey.objects.get(user=user).matches(key)
    assert JsonClient(key).get("/api/sessions").status_code == 200


def test_an_existing_user_gets_another_key(user: Any) -> None:
    first = run("alice").strip().splitlines()[-1]
    second = run("alice", "--name", "laptop").strip().splitlines()[-1]
    assert first != second
    assert ApiKey.objects.filter(user=user).count() == 2
    assert get_user_model().objects.filter(username="alice").count() == 1
