"""Create, append to, list and delete stored sessions; owner isolation lives here alone."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from compaction import (
    Problem,
    message_token_counts,
    tool_use_ids,
    validate_messages,
)
from sessions_app.models import Compaction, CompactionProfile, ContextEntry, Message, Session
from sessions_app.services.context import store as context_store
from sessions_app.services.errors import InvalidInput, VersionConflict
from sessions_app.services.errors import Problem as FieldProblem
from sessions_app.services.sessions.entries import append_rows, entry_message, split_message
from sessions_app.services.sessions.extras import extra_problems, message_time
from sessions_app.services.sessions.policies import profile_encoding, profile_for
from sessions_app.services.sessions.state import APPENDED_FIELDS, STATE_FIELDS, Change, advance
from sessions_app.services.sessions.usage import reported_usage
from sessions_app.storage import BLOB_PREFIX, delete_stored_quietly
from sessions_app.unstorable import unstorable_problems

__all__ = [
    "MAX_CONTEXT_LIMIT",
    "UNREAD",
    "append_locked",
    "append_messages",
    "appended_totals",
    "create_session",
    "delete_session",
    "reload_totals",
    "sessions_for",
    "system_message",
    "validate_extension",
]

logger = logging.getLogger("sessions_app")

_INDEX = re.compile(r"^messages\[(\d+)\]")

#: Largest context limit a session may have: far above any model's window, and well inside
#: the database column (a 32-bit integer on PostgreSQL).
MAX_CONTEXT_LIMIT = 1_000_000_000


def sessions_for(user: AbstractBaseUser | AnonymousUser | None) -> QuerySet[Session]:
    """The sessions `user` may see: their own, nobody else's (the one isolation rule)."""
    if user is None or not user.is_authenticated:
        return Session.objects.none()
    return Session.objects.filter(owner_id=user.pk)


def system_message(system: Any) -> dict[str, Any]:
    """A system prompt (text or blocks) as a leading system message."""
    return {"role": "system", "content": system}


def create_session(  # noqa: PLR0913 (the API body's fields, keyword-only)
    owner: User,
    *,
    title: str = "",
    messages: Iterable[Mapping[str, Any]] = (),
    system: Any = None,
    context_limit: int | None = None,
    profile: CompactionProfile | str | None = None,
    source_format: str = Session.SourceFormat.API,
    model: str = "",
    metadata: Mapping[str, Any] | None = None,
    external_id: str = "",
    parent: Session | None = None,
    parent_tool_use_id: str = "",
) -> Session:
    """A new session holding `messages` (after an optional system prompt), all or nothing.

    Invalid messages raise InvalidInput with paths relative to `messages`, and so does an
    unknown profile name (`profile`); nothing is stored in either case.
    """
    items = _copies(messages)
    if system is not None and system != "":
        items = [system_message(system), *items]
        offset = 1
    else:
        offset = 0
    chosen = _checked_fields(title, metadata, context_limit, profile)
    _raise_problems(validate_extension(None, items), offset=offset, system_path="system")
    with transaction.atomic():
        session = Session.objects.create(
            owner=owner,
            title=title,
            context_limit=context_limit,
            profile=chosen if chosen is not None and chosen.pk else None,
            source_format=source_format,
            model=model,
            metadata=dict(metadata or {}),
            external_id=external_id,
            parent=parent,
            parent_tool_use_id=parent_tool_use_id,
        )
        if items:
            _append_validated(session, items, profile=chosen)
    return session


def append_messages(
    session: Session,
    messages: Iterable[Mapping[str, Any]],
    *,
    expected_version: int | None = None,
) -> list[Message]:
    """Append `messages` to the full history and the runtime context, in one transaction.

    They are validated against the context they extend (a user message answering the last
    assistant's tool_use is accepted); problems raise InvalidInput with paths
    relative to `messages`. Appends never wait for a running compaction: a compaction only
    locks the session for its short commit. The last assistant message's `usage`, if any,
    becomes the session's `last_usage` in the same transaction.

    The messages are validated and counted before the transaction begins, against the
    session as read then; inside it, they are validated again only when the session changed
    meanwhile. So the write lock (SQLite's one for the whole database) is held for the
    INSERTs and the UPDATE, not for the work before them (docs/deployment.md, "SQLite").
    """
    items = _copies(messages)
    profile = profile_for(session)
    read_version = Session.objects.filter(pk=session.pk).values_list("version", flat=True).first()
    _validate_after(_last_message(session), items)
    counts = message_token_counts(items, profile_encoding(profile)) if items else []
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        if expected_version is not None and locked.version != expected_version:
            raise VersionConflict(expected_version, locked.version)
        if locked.version != read_version:  # appended to or compacted since it was read
            _validate_after(_last_message(locked), items)
        if items:
            rows = _append_validated(locked, items, profile=profile, save=False, counts=counts)
            changes = appended_totals(locked)  # the totals and the reply's usage in one write
            usage = reported_usage(items)
            if usage is not None:
                changes.update(advance(locked, Change(usage=usage)))
            Session.objects.filter(pk=locked.pk).update(**changes)
        else:
            rows = []
    _copy_totals(locked, session)
    return rows


#: `append_locked(previous=UNREAD)`: the context's last message is read.
UNREAD: Final = object()


def append_locked(
    locked: Session,
    messages: Iterable[Mapping[str, Any]],
    *,
    profile: CompactionProfile | None = None,
    previous: Mapping[str, Any] | object | None = UNREAD,
    save: bool = True,
) -> list[Message]:
    """`append_messages` for a caller that holds the session's lock in its own transaction
    (the proxy: services/proxying/turns.py): `locked` is the row it locked, with current totals,
    so there is no savepoint and no second read. `profile`: the session's (else read).

    `previous`: the message the context ends with, when the caller knows it (None: the
    context is empty; for validation only its role and, for an assistant, its tool_use
    ids count); else it is read. `save=False`: the new totals and version are set on
    `locked` but not saved; the caller writes `appended_totals(locked)` in its own UPDATE."""
    items = _copies(messages)
    if previous is UNREAD:
        previous = _last_message(locked)
    _validate_after(previous if isinstance(previous, Mapping) else None, items)
    return _append_validated(locked, items, profile=profile, save=save) if items else []


def _last_message(session: Session) -> dict[str, Any] | None:
    """The message the session's context ends with (None: the context is empty)."""
    last = (
        ContextEntry.objects.filter(session=session)
        .select_related("message")
        .order_by("-position")
        .first()
    )
    return entry_message(last) if last is not None else None


def _validate_after(previous: Mapping[str, Any] | None, items: list[Any]) -> None:
    """Raise InvalidInput with the problems of `items` appended after `previous`."""
    _raise_problems(validate_extension(previous, items), offset=1 if previous else 0)


def _checked_fields(
    title: str,
    metadata: Mapping[str, Any] | None,
    context_limit: int | None,
    profile: CompactionProfile | str | None,
) -> CompactionProfile | None:
    """create_session's fields beside the messages checked; the chosen profile."""
    if context_limit is not None and not 0 < context_limit <= MAX_CONTEXT_LIMIT:
        raise InvalidInput.field("context_limit", f"must be between 1 and {MAX_CONTEXT_LIMIT}")
    chosen = profile_for(None, profile) if isinstance(profile, str) else profile
    fields = [
        *unstorable_problems(title, "title"),
        *unstorable_problems(dict(metadata or {}), "metadata"),
    ]
    if fields:
        raise _invalid(fields)
    return chosen


def _copies(messages: Iterable[Any]) -> list[Any]:
    """Shallow copies of the messages (anything else is kept for validation to report)."""
    return [dict(m) if isinstance(m, Mapping) else m for m in messages]


def delete_session(session: Session) -> None:
    """Delete a session with its history, context, compactions, jobs and stored files."""
    with transaction.atomic():
        # Locked first, so a compaction committing meanwhile cannot add an archive unseen.
        Session.objects.select_for_update().filter(pk=session.pk).first()
        family = [session.pk, *Session.objects.filter(parent=session).values_list("pk", flat=True)]
        archives = Compaction.objects.filter(session__in=family).values_list("archive", flat=True)
        names = [name for name in archives if name]
        session.delete()
    for name in names:
        delete_stored_quietly(name)
    for pk in family:
        _delete_tree_quietly(f"{BLOB_PREFIX}/{pk}/")
        context_store.remove(str(pk))


def validate_extension(
    previous: Mapping[str, Any] | None, messages: Sequence[Mapping[str, Any]]
) -> list[Problem]:
    """Problems of `messages` appended after `previous`, paths counted over [previous, *messages].

    A final assistant message whose tool calls are not answered yet is allowed: its results
    arrive with the next append. What no database can store is a problem too (a NUL
    character or a lone surrogate in any string or key, NaN or an infinite number:
    sessions_app/unstorable.py), and so are unusable `created_at`/`timestamp` or `usage`
    keys (sessions_app/services/sessions/extras.py).
    """
    start = 0 if previous is None else 1
    unstorable = [
        problem
        for index, message in enumerate(messages, start=start)
        for problem in unstorable_problems(message, f"messages[{index}]")
    ]
    extras = extra_problems(messages, start)
    return [*_shape_problems(previous, messages), *unstorable, *extras]


def _shape_problems(
    previous: Mapping[str, Any] | None, messages: Sequence[Mapping[str, Any]]
) -> list[Problem]:
    # Only an assistant predecessor matters (its tool calls may be answered now); any other
    # stored message stands in as a placeholder, so its own tool results need no call before it.
    if previous is not None and previous.get("role") != "assistant":
        previous = {"role": previous.get("role"), "content": "(stored message)"}
    combined: list[Any] = [*([previous] if previous is not None else []), *messages]
    if not combined:
        return []
    last = combined[-1]
    pending = (
        tool_use_ids(last) if isinstance(last, Mapping) and last.get("role") == "assistant" else []
    )
    if pending and all(pending):
        answer = [{"type": "tool_result", "tool_use_id": i, "content": "pending"} for i in pending]
        combined.append({"role": "user", "content": answer})
    return validate_messages(combined)


def _raise_problems(problems: list[Problem], *, offset: int, system_path: str = "") -> None:
    """Raise InvalidInput with paths relative to the caller's `messages` list."""
    if not problems:
        return
    raise _invalid([_relocate(problem, offset, system_path) for problem in problems])


def _invalid(problems: Sequence[Problem]) -> InvalidInput:
    return InvalidInput(FieldProblem(p.path, p.message) for p in problems)


def _relocate(problem: Problem, offset: int, system_path: str) -> Problem:
    match = _INDEX.match(problem.path)
    if not match or not offset:
        return problem
    index = int(match.group(1)) - offset
    rest = problem.path[match.end() :]
    if index >= 0:
        return Problem(f"messages[{index}]{rest}", problem.message)
    if system_path:
        return Problem(f"{system_path}{rest.removeprefix('.content')}", problem.message)
    return Problem(
        "messages[0]",
        f"does not fit after the session's last message: {problem.message}",
    )


def _append_validated(
    session: Session,
    items: list[dict[str, Any]],
    *,
    profile: CompactionProfile | None = None,
    save: bool = True,
    counts: Sequence[int] | None = None,
) -> list[Message]:
    """Write validated messages as Message and ContextEntry rows; `session` must be locked.
    Its totals are saved as a new version (`save=False`: only set, see `append_locked`).
    `counts`: the messages' token counts in the profile's encoding, when already counted."""
    if counts is None:
        counts = message_token_counts(items, profile_encoding(profile or profile_for(session)))
    now = timezone.now()
    rows = []
    for offset, (item, count) in enumerate(zip(items, counts, strict=True)):
        role, content, extra = split_message(item)
        rows.append(
            Message(
                session=session,
                seq=session.next_seq + offset,
                role=role,
                content=content,
                extra=extra,
                token_count=count,
                original_id=_original_id(extra),
                created_at=message_time(extra, now),
            )
        )
    append_rows(session, rows)
    advance(session, Change.of_rows(rows))
    if save:
        session.save(update_fields=list(APPENDED_FIELDS))
    return rows


def appended_totals(session: Session) -> dict[str, Any]:
    """The fields `append_locked(save=False)` changed on `session`, for the caller's UPDATE."""
    return {name: getattr(session, name) for name in APPENDED_FIELDS}


def _copy_totals(source: Session, target: Session) -> None:
    for name in STATE_FIELDS:
        setattr(target, name, getattr(source, name))


def reload_totals(session: Session) -> None:
    """Reload the cached totals and version of `session` from the database."""
    fresh = Session.objects.get(pk=session.pk)
    _copy_totals(fresh, session)


def _original_id(extra: Mapping[str, Any]) -> str:
    value = extra.get("id")
    return str(value)[:200] if isinstance(value, str | int) else ""


def _delete_tree_quietly(prefix: str) -> None:
    try:
        directories, files = default_storage.listdir(prefix)
    except (OSError, NotImplementedError):
        return
    for name in files:
        delete_stored_quietly(f"{prefix}{name}")
    for directory in directories:
        _delete_tree_quietly(f"{prefix}{directory}/")
