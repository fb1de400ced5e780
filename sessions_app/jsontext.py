"""`JSONTextField`: a JSONField whose column holds the JSON text itself, on every database.

Message and context-entry contents are written once and read back mostly as text: the
context API splices each entry's stored JSON into the response without decoding it
(services/context/text.py). On PostgreSQL a `jsonb` column has to be turned back into text
on every such read, which cost more than the rest of a cold 1M-token context read together
(bench/README.md, `api`); a `text` column is sent as it is. On SQLite a JSONField is already
text, so nothing changes there. Values are still JSON: the field validates, encodes and
decodes exactly as a JSONField does, and the app never queries inside these contents.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.expressions import Value

__all__ = ["JSONTextField"]


class JSONTextField(models.JSONField):
    """A JSONField stored as `text` on PostgreSQL (the JSON as encoded), unchanged elsewhere."""

    def db_type(self, connection: BaseDatabaseWrapper) -> str | None:
        if connection.vendor == "postgresql":
            return "text"
        return super().db_type(connection)

    def get_db_prep_value(
        self, value: Any, connection: BaseDatabaseWrapper, prepared: bool = False
    ) -> Any:
        if connection.vendor != "postgresql":
            return super().get_db_prep_value(value, connection, prepared)
        if not prepared:
            value = self.get_prep_value(value)
        if isinstance(value, Value) and isinstance(value.output_field, models.JSONField):
            value = value.value
        elif hasattr(value, "as_sql"):
            return value
        return json.dumps(value, cls=self.encoder)
