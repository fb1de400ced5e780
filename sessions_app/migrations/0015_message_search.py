"""The full-text index of every message of every history (issue 28, selectors/search.py).

Kept by the database itself, so no writer of Message rows can forget it (appends, the
proxy, imports and their merges, deletes by cascade): the search reads what was written.

- PostgreSQL: a GIN index on the expression `ctxweb_search_document(content)`, the words of
  every string value of the stored JSON (text blocks, tool inputs and results) as written
  ('simple': no stemming, no stop words, the same in every language). No column is added
  and there is nothing to keep in step: PostgreSQL maintains the index on every INSERT,
  UPDATE and DELETE.
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

# The words of every string value of a message: PostgreSQL's parser keeps a path, a file
# name, an address as one token ('src/main.py'); its lexemes are parsed again with '.', '/',
# '@' and ':' as spaces, so `main.py` finds 'src/main.py' (as FTS5 splits them). Declared
# IMMUTABLE (array_to_string is only STABLE in general, not for text[]) so it can be indexed.
POSTGRES_FUNCTION = """
CREATE OR REPLACE FUNCTION ctxweb_search_document(content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT to_tsvector('simple'::regconfig, translate(array_to_string(tsvector_to_array(
    jsonb_to_tsvector('simple'::regconfig, content::jsonb, '["string"]'::jsonb)), ' '),
    './@:', '    '))
$$
"""
POSTGRES_FORWARD = [
    POSTGRES_FUNCTION,
    f"CREATE INDEX {_FTS} ON sessions_app_message USING gin (ctxweb_search_document(content))",
]
POSTGRES_BACKWARD = [
    f"DROP INDEX IF EXISTS {_FTS}",
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
