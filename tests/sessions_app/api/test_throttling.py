"""Rate limits of the endpoints that can call a paid summary model: per API key (or per
browser user), configured by CTXWEB_THROTTLE_COMPACT / CTXWEB_THROTTLE_PREPARE, answered
429 JSON with Retry-After, counted in the shared cache.

The throttle's clock is pinned (SummarizerThrottle.timer), so no test depends on where in a
window it happens to run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from sessions_app.api.throttling import SummarizerThrottle, parse_rate
from sessions_app.models import ApiKey, Compaction, Session
from tests.sessions_app.conftest import JsonClient
from tests.support.histories import user

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]
#: 30 s into a minute: a 60-second window has 30 s left.
NOW = 1_800_000_030.0
TINY = {"messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(autouse=True)
def _pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SummarizerThrottle, "timer", staticmethod(lambda: NOW))


def test_the_stateless_compact_is_throttled_per_key_with_retry_after(
    api_client: JsonClient, other_client: JsonClient, settings: Any
) -> None:
    settings.CTXWEB_THROTTLE_COMPACT = "2/min"

    statuses = [api_client.post("/api/compact", TINY).status_code for _ in range(3)]
    refused = api_client.post("/api/compact", TINY)

    assert statuses == [200, 200, 429]
    assert refused.status_code == 429
    assert refused["Content-Type"].startswith("application/json")
    assert "summary model" in refused.json()["detail"]
    assert refused["Retry-After"] == "30"
    assert other_client.post("/api/compact", TINY).status_code == 200, "other callers unaffected"


def test_each_api_key_has_its_own_budget(api_client: JsonClient, user: Any, settings: Any) -> None:
    settings.CTXWEB_THROTTLE_COMPACT = "1/min"
    _, second_key = ApiKey.issue(user, "second")

    assert api_client.post("/api/compact", TINY).status_code == 200
    assert api_client.post("/api/compact", TINY).status_code == 429
    assert JsonClient(second_key).post("/api/compact", TINY).status_code == 200


def test_session_compactions_are_throttled_before_anything_runs(
    api_client: JsonClient, make_session: Callable[..., Session], settings: Any
) -> None:
    settings.CTXWEB_THROTTLE_COMPACT = "1/hour"
    session = make_session()
    url = f"/api/sessions/{session.pk}/compactions"

    first = api_client.post(url, {"dry_run": True})
    refused = api_client.post(url, {})

    assert first.status_code == 200
    assert refused.status_code == 429
    assert refused["Retry-After"] == str(3600 - 30)
    assert not Compaction.objects.exists()


def test_the_stateless_and_session_compactions_share_one_budget(
    api_client: JsonClient, make_session: Callable[..., Session], settings: Any
) -> None:
    settings.CTXWEB_THROTTLE_COMPACT = "1/min"
    session = make_session()

    assert api_client.post("/api/compact", TINY).status_code == 200
    response = api_client.post(f"/api/sessions/{session.pk}/compactions", {"dry_run": True})
    assert response.status_code == 429


def test_prepare_has_its_own_limit(
    api_client: JsonClient, make_session: Callable[..., Session], settings: Any
) -> None:
    settings.CTXWEB_THROTTLE_COMPACT = "1/min"
    settings.CTXWEB_THROTTLE_PREPARE = "2/min"
    session = make_session(messages=[user("hi")])
    url = f"/api/sessions/{session.pk}/context/prepare"

    statuses = [api_client.post(url).status_code for _ in range(3)]

    assert statuses == [200, 200, 429]
    assert api_client.post("/api/compact", TINY).status_code == 200


def test_a_browser_session_is_throttled_per_user(user: Any, settings: Any) -> None:
    settings.CTXWEB_THROTTLE_COMPACT = "1/min"
    first, second = JsonClient(), JsonClient()
    first.force_login(user)
    second.force_login(user)

    assert first.post("/api/compact", TINY).status_code == 200
    assert second.post("/api/compact", TINY).status_code == 429


def test_off_means_no_limit(api_client: JsonClient, settings: Any) -> None:
    settings.CTXWEB_THROTTLE_COMPACT = "off"

    statuses = {api_client.post("/api/compact", TINY).status_code for _ in range(5)}

    assert statuses == {200}


def test_the_next_window_starts_afresh(
    api_client: JsonClient, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CTXWEB_THROTTLE_COMPACT = "1/min"
    assert api_client.post("/api/compact", TINY).status_code == 200
    assert api_client.post("/api/compact", TINY).status_code == 429

    monkeypatch.setattr(SummarizerThrottle, "timer", staticmethod(lambda: NOW + 30))

    assert api_client.post("/api/compact", TINY).status_code == 200


@pytest.mark.parametrize(
    ("rate", "parsed"),
    [
        ("30/min", (30, 60)),
        ("5/s", (5, 1)),
        ("100/5min", (100, 300)),
        ("1000/day", (1000, 86400)),
        ("2 / hour", (2, 3600)),
        ("off", None),
        ("", None),
    ],
)
def test_rates(rate: str, parsed: tuple[int, int] | None) -> None:
    assert parse_rate(rate) == parsed


@pytest.mark.parametrize("rate", ["30", "x/min", "30/fortnight", "-1/min", "0/min"])
def test_bad_rates_are_configuration_errors(rate: str) -> None:
    with pytest.raises(ImproperlyConfigured):
        parse_rate(rate)


def _settings_in_a_subprocess(env: dict[str, str], expression: str) -> str:
    """`expression` evaluated after importing ctxweb.settings under `env`."""
    full = {**os.environ, "DJANGO_SECRET_KEY": "x" * 64, **env}
    full.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run(
        [sys.executable, "-c", f"import ctxweb.settings as s; print({expression})"],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


@pytest.mark.parametrize(
    ("env", "backend"),
    [
        pytest.param(
            {"DJANGO_DEBUG": "0"}, "django.core.cache.backends.db.DatabaseCache", id="prod"
        ),
        pytest.param(
            {"DJANGO_DEBUG": "0", "CTXWEB_REDIS_URL": "redis://127.0.0.1:6379/1"},
            "django.core.cache.backends.redis.RedisCache",
            id="redis",
        ),
        pytest.param(
            {"DJANGO_DEBUG": "1"}, "django.core.cache.backends.locmem.LocMemCache", id="dev"
        ),
    ],
)
def test_production_settings_use_a_shared_cache(env: dict[str, str], backend: str) -> None:
    env = {"CTXWEB_CACHE_BACKEND": "", "CTXWEB_REDIS_URL": "", **env}

    assert _settings_in_a_subprocess(env, "s.CACHES['default']['BACKEND']") == backend


def test_a_bad_rate_stops_the_server_at_startup() -> None:
    with pytest.raises(subprocess.CalledProcessError) as caught:
        _settings_in_a_subprocess({"CTXWEB_THROTTLE_COMPACT": "lots"}, "1")
    assert "CTXWEB_THROTTLE_COMPACT" in caught.value.stderr


_WORKER = textwrap.dedent(
    """
    import sys
    import django
    django.setup()
    from django.core.management import call_command
    from django.test import RequestFactory
    from sessions_app.api.throttling import SummarizerThrottle

    call_command("migrate", run_syncdb=True, verbosity=0)
    SummarizerThrottle.timer = staticmethod(lambda: 1_800_000_030.0)
    throttle = SummarizerThrottle("compact")
    request = RequestFactory().post(
        "/api/compact", HTTP_AUTHORIZATION="Bearer ctx_0123456789ab_secret"
    )
    allowed = [throttle.allow_request(request) for _ in range(int(sys.argv[1]))]
    print(sum(allowed))
    """
)


@pytest.mark.slow
def test_two_processes_share_the_budget_through_the_database_cache(tmp_path: Path) -> None:
    # Two web processes, one after the other, on the production default (the database
    # cache): the second sees what the first counted.
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'shared.sqlite3'}",
        "CTXWEB_CACHE_BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "CTXWEB_CACHE_LOCATION": "ctxweb_cache",
        "CTXWEB_THROTTLE_COMPACT": "5/min",
    }

    def run(calls: int) -> int:
        result = subprocess.run(
            [sys.executable, "-c", _WORKER, str(calls)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return int(result.stdout.strip().splitlines()[-1])

    assert run(3) == 3
    assert run(4) == 2, "the second process may only use what is left of the budget"
