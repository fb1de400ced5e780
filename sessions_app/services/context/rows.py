"""A session's context entries as stored JSON rows, and the Anthropic message list spliced
from them without decoding (services/context/text.py assembles the response)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from operator import itemgetter

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import TextField
from django.db.models.functions import Cast, Coalesce

from sessions_app.exporters import request_messages
from sessions_app.models import ContextEntry, Session

__all__ = ["Row", "alternating", "joined_rows", "listed_rows", "raw_rows"]

#: (position, role, token_count, content as stored JSON text) of one entry.
Row = tuple[int, str, int, str]


def listed_rows(rows: Sequence[Row], *, after: str) -> tuple[str, str]:
    """(the messages of `rows` as JSON list items, the last one's role).

    Spliced from the stored JSON when the roles alternate and hold no system message;
    otherwise decoded and rendered as the Anthropic exporter does.
    """
    if alternating(rows, after=after):
        return joined_rows(rows), rows[-1][1] if rows else after
    decoded = [{"role": role, "content": json.loads(content)} for _, role, _, content in rows]
    rendered = request_messages(decoded)[1]
    listed = ",".join(json.dumps(message, cls=DjangoJSONEncoder) for message in rendered)
    return listed, str(rendered[-1]["role"]) if rendered else after


def alternating(rows: Sequence[Row], *, after: str) -> bool:
    """True when no row is a system message and no row has the role of the one before."""
    previous = after
    for _, role, _, _ in rows:
        if role == "system" or role == previous:
            return False
        previous = role
    return True


def raw_rows(session: Session, *, after: int | None = None) -> list[Row]:
    """(position, role, token_count, content as stored JSON text) of the entries, in order."""
    raw = Cast(Coalesce("content", "message__content"), output_field=TextField())
    entries = ContextEntry.objects.filter(session=session)
    if after is not None:
        entries = entries.filter(position__gt=after)
    # Sorted here rather than by the database, whose sort copies every content it read:
    # on PostgreSQL the query took about twice as long with it (bench/api.py, "rebuilt").
    rows = list(entries.order_by().values_list("position", "role", "token_count", raw))
    rows.sort(key=itemgetter(0))
    return rows


def joined_rows(rows: Sequence[Row]) -> str:
    roles = {role: json.dumps(role) for role in {row[1] for row in rows}}
    return ",".join(f'{{"role":{roles[role]},"content":{content}}}' for _, role, _, content in rows)
