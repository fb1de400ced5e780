"""Contents stored as JSON text (sessions_app/jsontext.py, migration 0003; issue 14)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from sessions_app.models import ContextEntry, Message
from sessions_app.services.context.runtime import context_payload, runtime_messages
from tests.support import postgres

pytestmark = pytest.mark.django_db

ROOT = Path(settings.BASE_DIR)
TOOL_USE: Any = [
    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"zeta": 1, "alpha": [2.5, None]}}
]
CONTENTS: list[Any] = [
    "plain text with ünïcode — 東京 🚀",
    TOOL_USE,
    [{"type": "tool_result", "tool_use_id": "t1", "content": 'quotes " and \\ and \n'}],
    [{"type": "text", "text": "b"}],
]


def test_contents_read_back_as_written(make_session: Any) -> None:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": c}
        for i, c in enumerate(CONTENTS)
    ]
    session = make_session(messages=messages)

    stored = list(Message.objects.filter(session=session).order_by("seq"))
    assert [m.content for m in stored] == CONTENTS
    assert [m["content"] for m in runtime_messages(session)] == CONTENTS
    assert [m["content"] for m in context_payload(session).messages] == CONTENTS


def test_an_entry_without_its_own_content_stores_null(make_session: Any) -> None:
    session = make_session(messages=[{"role": "user", "content": "hi"}])

    entry = ContextEntry.objects.get(session=session)
    assert entry.content is None
    assert ContextEntry.objects.filter(session=session, content__isnull=True).count() == 1


def test_on_postgresql_the_column_holds_the_json_text(make_session: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite keeps JSON as text already")
    session = make_session(messages=[{"role": "assistant", "content": TOOL_USE}])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, data_type FROM information_schema.columns "
            "WHERE column_name = 'content' AND table_name IN "
            "('sessions_app_message', 'sessions_app_contextentry') ORDER BY table_name"
        )
        assert cursor.fetchall() == [
            ("sessions_app_contextentry", "text"),
            ("sessions_app_message", "text"),
        ]
        cursor.execute(
            "SELECT content FROM sessions_app_message WHERE session_id = %s", [session.pk]
        )
        (text,) = cursor.fetchone()
    # Stored as encoded, key order kept (jsonb would have reordered the keys).
    assert text == json.dumps(TOOL_USE)


def _migrate(env: dict[str, str], target: str) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "sessions_app", target, "--no-input", "-v0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_migration_converts_stored_rows_both_ways(tmp_path: Path) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: on SQLite the migration changes no column")
    server = postgres.server_url(connection.settings_dict)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        CTXWEB_DATA_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="ctxweb.settings",
        PYTHONPATH=str(ROOT),
    )
    content = [{"type": "text", "text": "before 0003 — ü"}]
    with postgres.throwaway_database(server, "ctxweb_jsontext") as url:
        env["DATABASE_URL"] = url
        _migrate(env, "0002")
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(
                "INSERT INTO auth_user (password, last_login, is_superuser, username, first_name,"
                " last_name, email, is_staff, is_active, date_joined) VALUES"
                " ('', now(), false, 'm', '', '', '', false, true, now())"
            )
            db.execute(
                "INSERT INTO sessions_app_session (id, owner_id, title, source_format,"
                " external_id, model, parent_tool_use_id, raw_source, metadata, version,"
                " context_revision, next_position, compaction_failures, message_count,"
                " history_tokens, context_tokens, context_entry_count, compaction_count,"
                " next_seq, created_at, updated_at)"
                " SELECT gen_random_uuid(), id, '', 'api', '', '', '', '', '{}', 1, 1, 1, 0, 1,"
                " 3, 3, 0, 0, 1, now(), now() FROM auth_user"
            )
            db.execute(
                "INSERT INTO sessions_app_message (session_id, seq, role, content, extra,"
                " token_count, original_id, created_at)"
                " SELECT id, 0, 'user', %s::jsonb, '{}', 3, '', now() FROM sessions_app_session",
                [json.dumps(content)],
            )
            big = [{"type": "text", "text": "a long file " * 2000}]
            db.execute(
                "INSERT INTO sessions_app_message (session_id, seq, role, content, extra,"
                " token_count, original_id, created_at)"
                " SELECT id, 1, 'user', %s::jsonb, '{}', 3, '', now() FROM sessions_app_session",
                [json.dumps(big)],
            )
            _migrate(env, "0003")
            rows = db.execute(
                "SELECT pg_typeof(content)::text, content, pg_column_compression(content)"
                " FROM sessions_app_message ORDER BY seq"
            ).fetchall()
            assert [(kind, json.loads(text)) for kind, text, _ in rows] == [
                ("text", content),
                ("text", big),
            ]
            lz4 = db.execute(
                "SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression'"
                " AND 'lz4' = ANY(enumvals)"
            ).fetchone()
            assert rows[1][2] == ("lz4" if lz4 else "pglz")
            _migrate(env, "0002")
            rows = db.execute(
                "SELECT pg_typeof(content)::text, content FROM sessions_app_message ORDER BY seq"
            ).fetchall()
            assert rows == [("jsonb", content), ("jsonb", big)]
