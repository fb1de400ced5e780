"""A session's counters and caches have one writer (services/sessions/state.py).

An import's merge that rewrites a message in place changes existing context entries like a
compaction does: the stored context response is rebuilt once it commits and `last_usage`,
unless the merge itself brought one, is cleared. A property test then runs random
sequences of every write that changes messages or compactions (append, the proxy's answer,
an import's merge, compaction, revert, offload, undoing an offload, deleting a subagent)
through the services and checks after each step that the session row agrees with a count
of its rows, that its context response (as each reader finds it) is a full build, and that
`version` and `context_revision` moved when the rows did.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import Max, Sum
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import ScriptedSummarizer
from sessions_app.models import Compaction, ContextEntry, Message, Session
from sessions_app.services.compacting.offloading import offload_session
from sessions_app.services.compacting.reverting import revert_compaction
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.context import store as context_store
from sessions_app.services.context import text as context_text_module
from sessions_app.services.context.runtime import Format, context_body
from sessions_app.services.context.text import clear_cache
from sessions_app.services.errors import Conflict
from sessions_app.services.importing import import_file
from sessions_app.services.proxying.turns import record_answer
from sessions_app.services.sessions.lifecycle import append_messages, create_session, delete_session
from tests.sessions_app.transcripts import (
    boundary,
    cc_assistant,
    cc_user,
    compact_summary,
    jsonl,
    text,
    tool_result,
    tool_use,
)
from tests.support.histories import assistant, exchange, user

pytestmark = pytest.mark.django_db

USAGE = {"input_tokens": 10, "output_tokens": 5}
MERGED = "merged"
BIG = "line of tool output\n" * 40


def _lines(grown: bool, *, usage: Any = None) -> bytes:
    """A Claude Code transcript whose last reply (m2, no usage) gains a block when `grown`
    (the new line has `usage`)."""
    records: list[Any] = [
        cc_user("u1", None, "one"),
        cc_assistant("a1", "u1", [text("first answer")], "m1"),
        cc_user("u2", "a1", "two"),
        cc_assistant("a2", "u2", [text("second answer")], "m2", usage=None),
    ]
    if grown:
        records.append(cc_assistant("a2b", "a2", [tool_use("t9")], "m2", usage=usage))
    return jsonl(*records).encode()


def test_a_merge_rewriting_a_message_refreshes_the_stored_context_and_clears_last_usage(
    user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    session = import_file(user, _lines(False), name="live.jsonl").session
    assert session.last_usage is not None, "m1's usage"
    context_body(session)
    with django_capture_on_commit_callbacks(execute=True):
        merged = import_file(user, _lines(True), name="live.jsonl").session
    assert merged.pk == session.pk
    session.refresh_from_db()
    assert session.last_usage is None, "m1's count no longer describes the context"
    clear_cache(stored=False)  # another process: only the stored response
    with CaptureQueriesContext(connection) as queries:
        body = context_body(session)
    assert not [q for q in queries if "sessions_app_contextentry" in q["sql"]]
    assert b"t9" in body
    clear_cache()
    assert body == context_body(session)


def test_a_merge_rewriting_a_message_keeps_the_usage_it_brings(user: Any) -> None:
    session = import_file(user, _lines(False), name="live.jsonl").session
    revision = session.context_revision
    usage = {"input_tokens": 70, "output_tokens": 7}
    import_file(user, _lines(True, usage=usage), name="live.jsonl")
    session.refresh_from_db()
    assert session.context_revision > revision
    assert session.last_usage is not None
    assert session.last_usage["input_tokens"] == 70


#: The Session fields session_state.advance alone writes.
COUNTERS = {
    "version",
    "context_revision",
    "message_count",
    "history_tokens",
    "context_tokens",
    "context_entry_count",
    "compaction_count",
    "last_usage",
}
#: Besides the owner: the duplicate merge of migration 0014, which works on the migration's
#: historical models and so keeps its own copy of the rules (services/importing/dedupe.py).
OWNERS = {"services/sessions/state.py", "services/importing/dedupe.py"}


def _writes_counter(node: ast.AST) -> bool:
    """True when `node` assigns a counter attribute or passes one as a keyword to a
    queryset's update() or create()."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        writes = node.func.attr in {"update", "create", "get_or_create", "update_or_create"}
        return writes and any(keyword.arg in COUNTERS for keyword in node.keywords)
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    else:
        return False
    return any(isinstance(t, ast.Attribute) and t.attr in COUNTERS for t in targets)


def _counter_writes(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path}:{getattr(node, 'lineno', 0)}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if _writes_counter(node)
    ]


def test_only_the_owner_writes_the_counters() -> None:
    app = Path(__file__).resolve().parents[3] / "sessions_app"
    found = [
        place
        for path in sorted(app.rglob("*.py"))
        if "migrations" not in path.parts and path.relative_to(app).as_posix() not in OWNERS
        for place in _counter_writes(path)
    ]
    assert found == [], "write them through services/sessions/state.advance"


# The property test ---------------------------------------------------------------------


@dataclass
class World:
    """The session under test, its transcript so far and what the last step reported."""

    owner: Any
    session: Session
    records: list[Any]
    turn: int = 0
    #: The usage the step reported (None: none; MERGED: a merge, whose usage the tests
    #: above check: its transcript's lines decide it).
    usage: dict[str, Any] | str | None = None
    subagents: list[Session] = field(default_factory=list)

    def uuid(self, prefix: str) -> str:
        self.turn += 1
        return f"{prefix}{self.turn}"


def _append(world: World, with_usage: bool) -> None:
    extra = {"usage": dict(USAGE, input_tokens=100 + world.turn)} if with_usage else {}
    world.turn += 1
    tool = f"api{world.turn}"
    messages = [user(f"question {world.turn}"), *exchange(tool, result=BIG)]
    messages.append(assistant(f"answer {world.turn}", **extra))
    append_messages(world.session, messages)
    world.usage = extra.get("usage")


def _proxy_answer(world: World, with_usage: bool) -> None:
    session = world.session
    session.refresh_from_db()
    digests = [f"d{i}" for i in range(session.message_count)]
    Session.objects.filter(pk=session.pk).update(proxy_state={"digests": digests})
    extra = {"usage": dict(USAGE, output_tokens=50 + world.turn)} if with_usage else {}
    world.turn += 1
    answer = assistant(f"from upstream {world.turn}", **extra)
    assert record_answer(session.pk, len(digests), answer, f"answer{world.turn}")
    world.usage = extra.get("usage")


def _merge(world: World, with_usage: bool, how: str) -> None:
    """The transcript grows (a new exchange, its last reply rewritten in place, or a
    compaction of the agent's own) and is imported again."""
    parent = world.records[-1]["uuid"]
    usage = dict(USAGE, input_tokens=300 + world.turn) if with_usage else None
    if how == "in place":
        last = world.records[-1]
        mid = last["message"]["id"] if last["type"] == "assistant" else world.uuid("m")
        block = [text(f"more {world.turn}")]
        world.records.append(cc_assistant(world.uuid("a"), parent, block, mid, usage=usage))
    elif how == "compacted":
        mark = world.uuid("b")
        world.records.append(boundary(mark, parent))
        summary = world.uuid("s")
        world.records.append(compact_summary(summary, mark, f"summary {world.turn}"))
        question = world.uuid("u")
        world.records.append(cc_user(question, summary, "go on"))
        reply = [text("on it")]
        world.records.append(
            cc_assistant(world.uuid("a"), question, reply, world.uuid("m"), usage=usage)
        )
    else:
        _merge_exchange(world, parent, usage)
    import_file(world.owner, jsonl(*world.records).encode(), name="live.jsonl")
    world.usage = MERGED


def _merge_exchange(world: World, parent: str, usage: dict[str, Any] | None) -> None:
    question, call, result = world.uuid("u"), world.uuid("a"), world.uuid("u")
    tool = world.uuid("t")
    world.records += [
        cc_user(question, parent, f"task {world.turn}"),
        cc_assistant(call, question, [tool_use(tool)], world.uuid("m")),
        cc_user(result, call, [tool_result(tool, BIG)]),
        cc_assistant(world.uuid("a"), result, [text("done")], world.uuid("m"), usage=usage),
    ]


def _compact(world: World) -> None:
    compact_session(world.session, summarizer=ScriptedSummarizer(default="THE SUMMARY"))
    world.usage = None


def _offload(world: World) -> None:
    offload_session(world.session, min_chars=200)
    world.usage = None


def _revert(world: World, offloads: bool) -> None:
    """Revert the newest compaction (or offload) that may be reverted, if any."""
    rows = Compaction.objects.filter(session=world.session, status=Compaction.Status.SUCCEEDED)
    rows = rows.filter(strategy="offload") if offloads else rows.exclude(strategy="offload")
    for number in rows.order_by("-number").values_list("number", flat=True):
        try:
            revert_compaction(world.session, number)
        except Conflict:
            continue
        break
    world.usage = None


def _delete_subagent(world: World, make: bool) -> None:
    """Make a subagent session under the session, or delete the newest one."""
    if make or not world.subagents:
        child = create_session(world.owner, messages=[user("sub task")], parent=world.session)
        context_body(child)
        world.subagents.append(child)
    else:
        child = world.subagents.pop()
        delete_session(child)
        assert not Session.objects.filter(pk=child.pk).exists()
        assert context_store.header(str(child.pk), "anthropic") is None
    world.usage = None


STEPS: dict[str, Callable[..., None]] = {
    "append": _append,
    "proxy answer": _proxy_answer,
    "merge": _merge,
    "compact": _compact,
    "offload": _offload,
    "revert": _revert,
    "subagent": _delete_subagent,
}

_either = (
    st.tuples(st.just("compact")),
    st.tuples(st.just("offload")),
    st.tuples(st.just("revert"), st.booleans()),
    st.tuples(st.just("subagent"), st.booleans()),
)
# A session grows either by its transcript (merges) or by appends (REST, proxy), as real
# sessions do. Both in one session is left out: a merge then places the transcript's new
# lines after its own last line, before the appended ones, and the context pairs tool calls
# wrongly (noted for the merge's owner; not a counter's concern).
fed_by_appends = st.one_of(
    st.tuples(st.just("append"), st.booleans()),
    st.tuples(st.just("proxy answer"), st.booleans()),
    *_either,
)
fed_by_transcript = st.one_of(
    st.tuples(
        st.just("merge"), st.booleans(), st.sampled_from(["exchange", "in place", "compacted"])
    ),
    *_either,
)


def _rows(session: Session) -> tuple[Any, ...]:
    """What the session's rows say: messages and live entries, as a comparable value."""
    messages = Message.objects.filter(session=session).order_by("seq")
    entries = ContextEntry.objects.filter(session=session).order_by("position")
    return (
        tuple(messages.values_list("seq", "content", "token_count")),
        tuple(entries.values_list("pk", "position", "content", "token_count")),
    )


def _check_counters(session: Session) -> None:
    """The row's counters equal a count of its rows."""
    messages = Message.objects.filter(session=session)
    history = messages.aggregate(tokens=Sum("token_count"), top=Max("seq"))
    entries = ContextEntry.objects.filter(session=session)
    context = entries.aggregate(tokens=Sum("token_count"), top=Max("position"))
    points = Compaction.objects.filter(session=session, status=Compaction.Status.SUCCEEDED)
    assert session.message_count == messages.count()
    assert session.history_tokens == (history["tokens"] or 0)
    assert session.next_seq == (history["top"] or 0) + 1
    assert session.context_entry_count == entries.count()
    assert session.context_tokens == (context["tokens"] or 0)
    assert session.next_position > (-1 if context["top"] is None else context["top"])
    assert session.compaction_count == points.exclude(strategy="offload").count()


FORMATS: tuple[Format, ...] = ("anthropic", "openai")


def _held(session: Session) -> dict[Format, Any]:
    """The copies this process holds of the session's context responses."""
    return {fmt: context_text_module._cache.get((session.pk, fmt)) for fmt in FORMATS}


def _check_context(session: Session, held: dict[Format, Any]) -> None:
    """Each reader's first read (this process, a fresh one with only the stored response,
    another still holding the copy from before the step: `held`) is a full build."""
    bodies = {(fmt, "writer"): context_body(session, fmt) for fmt in FORMATS}
    clear_cache(stored=False)
    bodies.update({(fmt, "fresh"): context_body(session, fmt) for fmt in FORMATS})
    for fmt, copy in held.items():
        if copy is not None:
            context_text_module._cache.put((session.pk, fmt), copy)
            bodies[fmt, "stale"] = context_body(session, fmt)
    clear_cache()
    built = {fmt: context_body(session, fmt) for fmt in FORMATS}
    for (fmt, reader), body in bodies.items():
        assert json.loads(body) == json.loads(built[fmt]), (fmt, reader)


def _check_step(world: World, was: Session, rows: tuple[Any, ...]) -> None:
    session = Session.objects.get(pk=world.session.pk)
    _check_counters(session)
    now = _rows(session)
    if now != rows:
        assert session.version > was.version, "rows changed: a new version"
    if now[1][: len(rows[1])] != rows[1]:
        assert session.context_revision > was.context_revision, "existing entries changed"
        if world.usage is None:
            assert session.last_usage is None, "the model's count no longer describes it"
    if isinstance(world.usage, dict):
        assert session.last_usage is not None
        assert {k: session.last_usage[k] for k in world.usage} == world.usage
    world.session = session


def _check_refreshed(session: Session, was: Session) -> None:
    """A step that changed existing entries had the stored responses (both formats were
    read before it) rebuilt once it committed, so that no reader builds them."""
    if session.context_revision == was.context_revision:
        return
    for fmt in FORMATS:
        header = context_store.header(str(session.pk), fmt)
        assert header is not None
        stamp = (header["revision"], header["version"])
        assert stamp == (session.context_revision, session.version), fmt


@pytest.fixture
def world_factory(user: Any, make_profile: Any) -> Callable[[], World]:
    profile = make_profile(keep_recent_messages=2, steps=["summary"], offload_min_chars=200)

    def make() -> World:
        records = [
            cc_user("u0", None, "start"),
            cc_assistant("a0", "u0", [text("started")], "m0"),
        ]
        session = import_file(user, jsonl(*records).encode(), name="live.jsonl").session
        Session.objects.filter(pk=session.pk).update(profile=profile)
        session.refresh_from_db()
        return World(user, session, records)

    return make


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(fed_by_appends, min_size=1, max_size=8)
    | st.lists(fed_by_transcript, min_size=1, max_size=8)
)
def test_every_write_leaves_counters_context_and_versions_consistent(
    steps: list[tuple[Any, ...]],
    world_factory: Callable[[], World],
    django_capture_on_commit_callbacks: Any,
) -> None:
    with _rolled_back():
        clear_cache()
        world = world_factory()
        _check_context(world.session, {})
        for name, *args in steps:
            was, rows = Session.objects.get(pk=world.session.pk), _rows(world.session)
            held = _held(world.session)
            with django_capture_on_commit_callbacks(execute=True):
                STEPS[name](world, *args)
            _check_step(world, was, rows)
            _check_refreshed(world.session, was)
            _check_context(world.session, held)


@contextmanager
def _rolled_back() -> Iterator[None]:
    """One example's writes, undone after it (examples share the test's database)."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)
