"""Fixtures for the web app's tests: users, API-key clients, a session factory.

Generic on purpose (the importer and UI tests reuse them):
- `user`, `other_user`: two owners; `api_key` is `user`'s plain key.
- `api_client`, `other_client`: django test Clients sending a Bearer key; `anon_client`.
- `make_session(owner=None, messages=None, **kwargs)`: a stored session (create_session).
- `conversation(rounds)`: a valid history with tool calls (system first).
- `scripted(*items)`: sets CTXWEB_SUMMARIZER_CLASS so every compaction uses a
  ScriptedSummarizer answering `items` (shared by all requests of the test).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client

from compaction import ScriptedSummarizer
from sessions_app.models import ApiKey, CompactionProfile, Session
from sessions_app.services.sessions.lifecycle import create_session
from tests.support.histories import synthetic_history

User = get_user_model()


class JsonClient(Client):
    """A test Client that sends JSON bodies by default and a Bearer key when given one."""

    def __init__(self, key: str | None = None, **defaults: Any) -> None:
        if key:
            defaults.setdefault("HTTP_AUTHORIZATION", f"Bearer {key}")
        super().__init__(**defaults)

    def post(  # type: ignore[override]
        self,
        path: Any,
        data: Any = None,
        content_type: str = "application/json",
        follow: bool = False,
        secure: bool = False,
        *,
        headers: Any = None,
        query_params: Any = None,
        **extra: Any,
    ) -> Any:
        return super().post(
            path,
            data,
            content_type=content_type,
            follow=follow,
            secure=secure,
            headers=headers,
            query_params=query_params,
            **extra,
        )


@pytest.fixture(autouse=True)
def _clear_cache() -> Iterator[None]:
    """Failed-authentication counters live in the cache: no test sees another's."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _isolated_storage(settings: Any, tmp_path: Any) -> None:
    """Archives, offloaded files and stored context responses of each test go to its own
    folder (another xdist worker clearing its stored responses must not remove these); fast
    password hashing."""
    settings.DATA_DIR = str(tmp_path / "data")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "blobs")},
        },
    }


@pytest.fixture
def user(db: Any) -> Any:
    return User.objects.create_user(username="alice", password="alice-password-123")


@pytest.fixture
def other_user(db: Any) -> Any:
    return User.objects.create_user(username="bob", password="bob-password-123")


@pytest.fixture
def api_key(user: Any) -> str:
    _, key = ApiKey.issue(user, "test")
    return key


@pytest.fixture
def api_client(api_key: str) -> JsonClient:
    return JsonClient(api_key)


@pytest.fixture
def other_client(other_user: Any) -> JsonClient:
    _, key = ApiKey.issue(other_user, "test")
    return JsonClient(key)


@pytest.fixture
def anon_client() -> JsonClient:
    return JsonClient()


def conversation_messages(rounds: int = 6, *, words: int = 40) -> list[dict[str, Any]]:
    """A valid history: a system prompt, then `rounds` user/tool/assistant rounds."""
    return synthetic_history(1 + rounds * 6, words_per_message=words, tool_every=2)


@pytest.fixture
def conversation() -> Callable[..., list[dict[str, Any]]]:
    return conversation_messages


@pytest.fixture
def make_session(user: Any) -> Callable[..., Session]:
    def make(
        owner: Any = None, messages: list[dict[str, Any]] | None = None, **kwargs: Any
    ) -> Session:
        items = conversation_messages() if messages is None else messages
        return create_session(owner or user, messages=items, **kwargs)

    return make


@pytest.fixture
def make_profile(db: Any) -> Callable[..., CompactionProfile]:
    """A saved CompactionProfile: Policy defaults, no retry backoff, overridden by `fields`."""

    def make(name: str = "test", **fields: Any) -> CompactionProfile:
        values: dict[str, Any] = {"retry_backoff_seconds": 0.0, "summarizer": "extractive"}
        values.update(fields)
        return CompactionProfile.objects.create(name=name, **values)

    return make


_SCRIPTED: list[ScriptedSummarizer] = []


def scripted_summarizer(profile: Any) -> ScriptedSummarizer:
    """CTXWEB_SUMMARIZER_CLASS target: the current test's ScriptedSummarizer."""
    assert _SCRIPTED, "the scripted() fixture is not installed"
    return _SCRIPTED[-1]


@pytest.fixture
def scripted(settings: Any) -> Iterator[Callable[..., ScriptedSummarizer]]:
    """Route every compaction to one ScriptedSummarizer; returns it for assertions."""

    def install(*items: Any, default: Any = None) -> ScriptedSummarizer:
        summarizer = ScriptedSummarizer(*items, default=default)
        _SCRIPTED.append(summarizer)
        settings.CTXWEB_SUMMARIZER_CLASS = "tests.sessions_app.conftest.scripted_summarizer"
        return summarizer

    yield install
    _SCRIPTED.clear()


__all__ = ["JsonClient", "conversation_messages", "scripted_summarizer"]
