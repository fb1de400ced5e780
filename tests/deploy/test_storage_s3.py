"""Archives and offloaded files on an S3-compatible bucket (moto's S3 server on 127.0.0.1).

In production: CTXWEB_STORAGE_BACKEND=storages.backends.s3.S3Storage and
CTXWEB_STORAGE_OPTIONS='{"bucket_name": ..., "endpoint_url": ...}' (docs/deployment.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import free_port, manage, production_env

boto3 = pytest.importorskip("boto3")
pytest.importorskip("storages")
moto_server = pytest.importorskip("moto.server")

BUCKET = "ctxweb-test"
CREDENTIALS = {"access_key": "testing", "secret_key": "testing", "region_name": "us-east-1"}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on a free loopback port, with an empty bucket."""
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        yield endpoint
    finally:
        server.stop()


@pytest.fixture
def bucket(s3_endpoint: str) -> Iterator[Any]:
    resource = boto3.resource(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    created = resource.create_bucket(Bucket=BUCKET)
    try:
        yield created
    finally:
        created.objects.all().delete()
        created.delete()


def _options(endpoint: str) -> dict[str, Any]:
    return {"bucket_name": BUCKET, "endpoint_url": endpoint, "file_overwrite": False, **CREDENTIALS}


@pytest.fixture
def s3_storage(settings: Any, s3_endpoint: str, bucket: Any) -> Any:
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": _options(s3_endpoint)},
    }
    return bucket


def _keys(bucket: Any) -> list[str]:
    return sorted(item.key for item in bucket.objects.all())


def test_compaction_archive_offload_and_revert_work_on_s3(s3_storage: Any, db: Any) -> None:
    from django.contrib.auth import get_user_model

    from sessions_app.services.compacting.offloading import blob_store_for, offload_session
    from sessions_app.services.compacting.reverting import revert_compaction
    from sessions_app.services.compacting.session_compaction import compact_session
    from sessions_app.services.sessions.lifecycle import create_session, delete_session
    from tests.support.histories import exchange, synthetic_history

    from .integrity import context_fingerprint, session_problems

    owner = get_user_model().objects.create_user(username="s3")
    big = "a large tool output line\n" * 100
    history = [
        *synthetic_history(40, words_per_message=80),
        *exchange("toolu_big", "Bash", None, big),
    ]
    session = create_session(owner, messages=history, context_limit=2000)

    offloaded = offload_session(session, min_chars=len(big) - 1)
    before_compaction = context_fingerprint(session)
    outcome = compact_session(session, trigger="manual")

    assert offloaded.offloaded_count == 1
    assert blob_store_for(session).read("tool-result-toolu_big.md").decode() == big
    assert outcome.compaction is not None
    assert outcome.compacted
    keys = _keys(s3_storage)
    assert f"offload/{session.pk}/tool-result-toolu_big.md" in keys
    assert outcome.compaction.archive.name in keys
    archived = json.loads(outcome.compaction.archive.read())
    assert archived["entries"]
    assert session_problems(session, expected_messages=len(history)) == []

    revert_compaction(session, outcome.compaction.number)
    assert context_fingerprint(session)[: len(before_compaction)] == before_compaction

    delete_session(session)
    assert _keys(s3_storage) == [], "deleting the session removes its objects"


def test_no_stored_object_is_replaced_on_s3(s3_storage: Any) -> None:
    from sessions_app.storage import DjangoStorageBlobStore

    store = DjangoStorageBlobStore("offload/s1")
    store.write("tool-result-a.md", b"first")

    assert store.create("tool-result-a.md", b"second") is None
    store.write("tool-result-a.md", b"third")
    assert store.read("tool-result-a.md") == b"first"
    assert len(_keys(s3_storage)) == 2


def test_no_archive_or_blob_is_replaced_with_the_backends_default_file_overwrite(
    settings: Any, s3_endpoint: str, bucket: Any
) -> None:
    """django-storages' S3 backend replaces a taken name unless `file_overwrite` is false:
    ctxweb checks for a taken name itself."""
    from datetime import UTC, datetime

    from sessions_app.services.compacting.archives import ArchiveHeader, write_archive
    from sessions_app.storage import DjangoStorageBlobStore

    options = {k: v for k, v in _options(s3_endpoint).items() if k != "file_overwrite"}
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options},
    }
    header = ArchiveHeader("s1", 3, datetime(2026, 5, 1, tzinfo=UTC), "manual")
    first = write_archive(header, [])
    second = write_archive(header, [])
    store = DjangoStorageBlobStore("offload/s1")
    store.write("tool-result-a.md", b"first")
    store.write("tool-result-a.md", b"second")

    assert first != second
    assert {first, second} <= set(_keys(bucket))
    assert store.read("tool-result-a.md") == b"first"
    assert len(_keys(bucket)) == 4


@pytest.mark.slow
def test_the_storage_is_configured_from_the_environment(
    tmp_path: Path, s3_endpoint: str, bucket: Any
) -> None:
    env = production_env(
        tmp_path,
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        CTXWEB_STORAGE_BACKEND="storages.backends.s3.S3Storage",
        CTXWEB_STORAGE_OPTIONS=json.dumps({"bucket_name": BUCKET, "endpoint_url": s3_endpoint}),
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
    )
    code = (
        "from django.core.files.base import ContentFile; "
        "from django.core.files.storage import default_storage as s; "
        "name = s.save('archives/probe.json', ContentFile(b'{}')); "
        "print(type(s._wrapped).__name__, name)"
    )

    completed = manage(env, "shell", "-c", code)

    assert "S3Storage archives/probe.json" in completed.stdout
    assert _keys(bucket) == ["archives/probe.json"]
    assert not (tmp_path / "blobs").exists(), "nothing written to the local data dir"
