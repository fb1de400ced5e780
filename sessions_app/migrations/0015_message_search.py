"""The full-text index of every message of every history (issue 28, selectors/search.py).

Kept by the database itself, so no writer of Message rows can forget it (appends, the
proxy, imports and their merges, deletes by cascade): the search reads what was written.

- PostgreSQL: a stored generated column `search_document` (tsvector) computed by
  `ctxweb_search_document(content)`, the words of every string value of the stored JSON
  (text blocks, tool inputs and results) as written ('simple': no stemming, no stop words,
  the same in every language), with a GIN index. The model does not declare the column:
  PostgreSQL computes it on every INSERT and UPDATE, whoever writes.
- SQLite: a contentless FTS5 table (rowid = Message.id) fed by triggers with the same
  strings (`json_tree`'s text values), deleted with FTS5's 'delete' command from the old
  row's strings. Contentless: the text is not stored a second time (the snippet is
  cut from the message itself).

Existing messages are indexed here. Other backends get no index (the search refuses).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

_FTS = "sessions_app_message_search"

# Every string value of a stored message's JSON, space-separated ('' for invalid JSON, which
# no writer stores, so that a write can never fail on the index).
_STRINGS = (
    "(SELECT group_concat(value, ' ') FROM json_tree("
    "CASE WHEN json_valid({row}.content) THEN {row}.content ELSE '\"\"' END) "
    "WHERE type = 'text')"
)

SQLITE_FORWARD = [
    f"CREATE VIRTUAL TABLE {_FTS} USING fts5(body, content='', "
    "tokenize='unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER {_FTS}_insert AFTER INSERT ON sessions_app_message BEGIN "
    f"INSERT INTO {_FTS}(rowid, body) VALUES (new.id, {_STRINGS.format(row='new')}); END",
    f"CREATE TRIGGER {_FTS}_delete AFTER DELETE ON sessions_app_message BEGIN "
    f"INSERT INTO {_FTS}({_FTS}, rowid, body) "
    f"VALUES ('delete', old.id, {_STRINGS.format(row='old')}); END",
    f"CREATE TRIGGER {_FTS}_update AFTER UPDATE OF content ON sessions_app_message BEGIN "
    f"INSERT INTO {_FTS}({_FTS}, rowid, body) "
    f"VALUES ('delete', old.id, {_STRINGS.format(row='old')}); "
    f"INSERT INTO {_FTS}(rowid, body) VALUES (new.id, {_STRINGS.format(row='new')}); END",
    f"INSERT INTO {_FTS}(rowid, body) "
    f"SELECT m.id, {_STRINGS.format(row='m')} FROM sessions_app_message AS m",
]
SQLITE_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {_FTS}_insert",
    f"DROP TRIGGER IF EXISTS {_FTS}_delete",
    f"DROP TRIGGER IF EXISTS {_FTS}_update",
    f"DROP TABLE IF EXISTS {_FTS}",
]

# The words of every string value of a message (keys left out), as the 'simple'
# configuration reads them once '.', '/', '@' and ':' are spaces: PostgreSQL's parser would
# keep 'src/main.py' as one token, and `main.py` should find it (as FTS5 splits it). The
# first 200,000 characters only, so no message can pass tsvector's 1 MB limit, and a
# content PostgreSQL cannot read as JSON is indexed as nothing: a write never fails on the
# index. PL/pgSQL, so that the planner sees one opaque call (an inlined SQL body is costed
# and planned as its parts).
POSTGRES_FUNCTION = """
CREATE OR REPLACE FUNCTION ctxweb_search_document(content text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN to_tsvector('simple'::regconfig, translate(left(coalesce((
    SELECT string_agg(value #>> '{}', ' ')
    FROM jsonb_path_query(content::jsonb, 'strict $.**') AS value
    WHERE jsonb_typeof(value) = 'string'), ''), 200000), './@:', '    '));
EXCEPTION WHEN others THEN
  RETURN ''::tsvector;
END
$$
"""
# A stored generated column: computed once per write by PostgreSQL itself (any writer), so
# a search reads it instead of computing it again for each row it checks.
POSTGRES_FORWARD = [
    POSTGRES_FUNCTION,
    "ALTER TABLE sessions_app_message ADD COLUMN search_document tsvector "
    "GENERATED ALWAYS AS (ctxweb_search_document(content)) STORED",
    f"CREATE INDEX {_FTS} ON sessions_app_message USING gin (search_document)",
]
POSTGRES_BACKWARD = [
    f"DROP INDEX IF EXISTS {_FTS}",
    "ALTER TABLE sessions_app_message DROP COLUMN IF EXISTS search_document",
    "DROP FUNCTION IF EXISTS ctxweb_search_document(text)",
]


def _run(statements: dict[str, list[str]]) -> Any:
    def run(apps: Any, schema_editor: Any) -> None:
        for statement in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0014_merge_duplicate_sessions")]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        )
    ]
