"""Message and context-entry contents as JSON text (sessions_app/jsontext.py, issue 14).

On PostgreSQL the two `jsonb` columns become `text`, every stored value converted in
place (`content::text`, the same JSON), compressed with lz4 where the server has it (it
decompresses several times faster than the default pglz, and a context read decompresses
every entry). On SQLite the columns are text already: only the field class changes, so no
table is rebuilt.
"""

from typing import Any

from django.db import migrations

import sessions_app.jsontext

TABLES = ("sessions_app_message", "sessions_app_contextentry")


def _alter(schema_editor: Any, to_type: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' "
            "AND 'lz4' = ANY(enumvals)"
        )
        lz4 = cursor.fetchone() is not None
    compression = ""
    if lz4:
        compression = ', ALTER COLUMN "content" SET COMPRESSION '
        compression += "lz4" if to_type == "text" else "DEFAULT"
    for table in TABLES:
        schema_editor.execute(
            f'ALTER TABLE "{table}" ALTER COLUMN "content" TYPE {to_type} '
            f'USING "content"::{to_type}{compression}'
        )


def to_text(apps: Any, schema_editor: Any) -> None:
    _alter(schema_editor, "text")


def to_jsonb(apps: Any, schema_editor: Any) -> None:
    _alter(schema_editor, "jsonb")


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0002_load_presets"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(to_text, to_jsonb)],
            state_operations=[
                migrations.AlterField(
                    model_name="contextentry",
                    name="content",
                    field=sessions_app.jsontext.JSONTextField(
                        blank=True, help_text="Null: the message's content.", null=True
                    ),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="content",
                    field=sessions_app.jsontext.JSONTextField(),
                ),
            ],
        ),
    ]
