"""Exporting a stored session: its runtime context or full history in an export format."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final, Literal

from sessions_app.exporters import EXPORT_FORMATS, Export, export_messages
from sessions_app.models import Message, Session
from sessions_app.services.context.runtime import runtime_messages
from sessions_app.services.errors import InvalidInput

__all__ = ["WHAT", "export_session", "history_messages"]

#: What can be exported: the runtime context (what the model sees now) or the full history.
WHAT: Final = ("context", "history")

What = Literal["context", "history"]


def history_messages(session: Session) -> Iterator[dict[str, Any]]:
    """The full history as engine messages, in order, read in chunks."""
    rows = Message.objects.filter(session=session).order_by("seq")
    for row in rows.iterator(chunk_size=500):
        yield row.as_dict()


def export_session(session: Session, fmt: str, what: str = "context") -> Export:
    """`session`'s context or history in `fmt`; InvalidInput naming `format` or `what` when
    either is unknown."""
    if fmt not in EXPORT_FORMATS:
        known = ", ".join(EXPORT_FORMATS)
        raise InvalidInput.field("format", f"unknown export format {fmt!r}; known: {known}")
    if what not in WHAT:
        raise InvalidInput.field(
            "what", f"unknown export content {what!r}; known: {', '.join(WHAT)}"
        )
    messages = runtime_messages(session) if what == "context" else history_messages(session)
    return export_messages(messages, fmt, title=session.title or str(session.pk))
