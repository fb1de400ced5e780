"""Fixtures for the security tests: two owners with API keys, sessions with every kind of id.

`world` builds, for the owner "alice" and the intruder "mallory", a session with a
compaction (archived), an offloadable tool result and a background job, so every URL of
the API can be called with real ids of someone else's objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client

from compaction import ScriptedSummarizer
from sessions_app.models import ApiKey, Compaction, CompactionJob, Session
from sessions_app.services.background.jobs import enqueue_compaction
from sessions_app.services.compacting.offloading import offload_session
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.sessions.lifecycle import create_session
from tests.support.histories import exchange, synthetic_history

BIG_RESULT = "line of a large tool output\n" * 200


class ApiClient(Client):
    """A Django test client that sends JSON and, when given a key, a Bearer header."""

    def __init__(self, key: str | None = None, **defaults: Any) -> None:
        if key:
            defaults.setdefault("HTTP_AUTHORIZATION", f"Bearer {key}")
        super().__init__(**defaults)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One request; JSON body for POST/PUT/PATCH."""
        handler = getattr(self, method.lower())
        if method.upper() in {"POST", "PUT", "PATCH"}:
            return handler(path, body if body is not None else {}, content_type="application/json")
        return handler(path)


@dataclass
class World:
    """Two owners; alice's objects; clients for each owner and for nobody."""

    alice: Any
    mallory: Any
    alice_key: str
    mallory_key: str
    session: Session
    compaction: Compaction
    job: CompactionJob
    tool_use_id: str

    @property
    def as_alice(self) -> ApiClient:
        return ApiClient(self.alice_key)

    @property
    def as_mallory(self) -> ApiClient:
        return ApiClient(self.mallory_key)

    @property
    def anonymous(self) -> ApiClient:
        return ApiClient()


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """Failed-authentication counters live in the cache: each test starts at zero."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def data_dir(settings: Any, tmp_path: Path) -> Path:
    """This test's storage root (archives, offloaded files) inside a sentinel parent."""
    root = tmp_path / "sentinel" / "data"
    root.mkdir(parents=True)
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(root / "blobs")},
        },
    }
    settings.MEDIA_ROOT = str(root / "blobs")
    return root


@pytest.fixture
def world(db: Any, data_dir: Path, settings: Any) -> World:
    settings.CTXWEB_SUMMARIZER_CLASS = "tests.security.conftest.scripted_summarizer"
    users = get_user_model().objects
    alice = users.create_user(username="alice")  # no password: hashing is slow
    mallory = users.create_user(username="mallory")
    _, alice_key = ApiKey.issue(alice, "alice")
    _, mallory_key = ApiKey.issue(mallory, "mallory")
    tool_use_id = "toolu_big_0001"
    history = [
        *synthetic_history(40, words_per_message=80),
        *exchange(tool_use_id, "Bash", {"command": "cat big.log"}, BIG_RESULT),
    ]
    session = create_session(alice, title="alice's session", messages=history, context_limit=2000)
    offloaded = offload_session(session, min_chars=len(BIG_RESULT) - 1)
    assert offloaded.offloaded_count == 1
    outcome = compact_session(session, trigger="manual")
    assert outcome.compaction is not None
    assert outcome.compacted
    job = enqueue_compaction(session, params={"trigger": "manual"})
    return World(
        alice=alice,
        mallory=mallory,
        alice_key=alice_key,
        mallory_key=mallory_key,
        session=session,
        compaction=outcome.compaction,
        job=job,
        tool_use_id=tool_use_id,
    )


def scripted_summarizer(profile: Any) -> ScriptedSummarizer:
    """CTXWEB_SUMMARIZER_CLASS for these tests: a fixed, offline summary."""
    return ScriptedSummarizer(default="Goals: keep the build green. Files: src/app.py.")


def files_under(root: Path) -> set[Path]:
    """Every file below `root`."""
    return {path for path in root.rglob("*") if path.is_file()}
