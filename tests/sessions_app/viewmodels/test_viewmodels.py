"""View models behind the pages: blocks, gauge, timeline, now-vs-before rows, session list."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from compaction import make_summary_message
from sessions_app.models import Compaction, ContextEntry, Session
from sessions_app.services.compacting.offloading import offload_session
from sessions_app.services.sessions.lifecycle import create_session
from sessions_app.services.sessions.threshold import shown_standing
from sessions_app.viewmodels.blocks import build_message_views, key_argument, offloaded_path
from sessions_app.viewmodels.compare import compare_view
from sessions_app.viewmodels.gauge import GRID_CELLS, context_gauge
from sessions_app.viewmodels.limits import Limits
from sessions_app.viewmodels.listing import SORTS, session_page
from sessions_app.viewmodels.timeline import _series, short_tokens, token_timeline
from tests.support.histories import exchange, system
from tests.support.histories import user as user_message

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def limits_for(session: Session) -> Limits:
    """What the session page hands its view models (views/session_detail.py)."""
    return Limits.of(shown_standing(session))


def row(seq: int, role: str, content: Any, **extra: Any) -> SimpleNamespace:
    return SimpleNamespace(
        seq=seq, role=role, content=content, extra=extra, created_at=NOW, token_count=3
    )


def test_key_argument_prefers_paths_and_commands() -> None:
    assert key_argument({"description": "d", "file_path": "src/a.py"}) == "src/a.py"
    assert key_argument({"command": "pytest -x\n  tests/"}) == "pytest -x tests/"
    assert key_argument({"cmd": ["git", "status"]}) == "git status"
    assert key_argument('{"pattern": "TODO"}') == "TODO"
    assert key_argument({"other": 3, "note": "first string"}) == "first string"
    assert key_argument({}) == ""
    assert key_argument("not json at all") == "not json at all"
    assert key_argument({"path": "x" * 500}).endswith("…")


def test_offloaded_path_reads_the_documented_reference() -> None:
    assert offloaded_path("[Content offloaded to: ./tool-result-t1.md]") == "tool-result-t1.md"
    assert offloaded_path("plain output") is None


def test_tool_results_are_drawn_with_their_calls() -> None:
    views = build_message_views(
        [
            row(1, "assistant", [{"type": "tool_use", "id": "a", "name": "Read", "input": {}}]),
            row(2, "user", [{"type": "tool_result", "tool_use_id": "a", "content": "ok\nfine"}]),
            row(3, "user", [{"type": "tool_result", "tool_use_id": "zz", "content": "orphan"}]),
        ]
    )
    call = views[0].blocks[0]
    assert call.kind == "tool_call"
    assert call.result is not None
    assert (call.result.text, call.result.lines, call.result.seq) == ("ok\nfine", 2, 2)
    assert views[1].hidden
    assert not views[2].hidden
    assert views[2].blocks[0].kind == "tool_result"


def test_long_texts_are_cut_unless_full() -> None:
    long = "x" * 5000
    cut = build_message_views([row(1, "user", long)])[0].blocks[0]
    assert cut.truncated
    assert len(cut.text) < 5000
    assert cut.chars == 5000
    whole = build_message_views([row(1, "user", long)], full=True)[0].blocks[0]
    assert not whole.truncated
    assert whole.text == long


def test_summary_messages_are_marked_and_lose_their_prefix() -> None:
    summary = make_summary_message("Goals: ship it.")
    extra = {k: v for k, v in summary.items() if k not in {"role", "content"}}
    view = build_message_views([row(4, "user", summary["content"], **extra)])[0]
    assert view.is_summary
    assert view.blocks[0].text == "Goals: ship it."


def test_unknown_and_media_blocks() -> None:
    content = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}},
        {"type": "weird", "x": 1},
        {"type": "redacted_thinking", "data": "abc"},
    ]
    kinds = [b.kind for b in build_message_views([row(1, "user", content)])[0].blocks]
    assert kinds == ["image", "other", "redacted_thinking"]


def test_short_tokens() -> None:
    assert [short_tokens(v) for v in (950, 12345, 200_000, 2_100_000)] == [
        "950",
        "12.3k",
        "200k",
        "2.1M",
    ]


@pytest.mark.django_db
def test_gauge_splits_runtime_tokens_by_kind(ui_session: UiSession) -> None:
    session = ui_session.session
    limits = limits_for(session)
    gauge = context_gauge(session, limits)
    by_key = {s.key: s.tokens for s in gauge.segments}
    assert sum(by_key.values()) == gauge.total == session.context_tokens
    assert by_key["system"] > 0
    assert (
        by_key["summaries"] == ContextEntry.objects.get(session=session, kind="summary").token_count
    )
    assert by_key["tools"] > 0
    assert by_key["messages"] > 0
    assert gauge.free.tokens == limits.context_limit - gauge.total
    assert len(gauge.cells) == GRID_CELLS
    assert [c.key for c in gauge.cells if c.threshold] == [gauge.cells[90].key]
    assert gauge.cells[90].threshold
    assert gauge.cells[-1].key == "free"
    assert gauge.cells[0].key == "system"  # a tiny kind still gets a cell


@pytest.mark.django_db
def test_limits_come_from_the_session_then_its_profile(ui_session: UiSession) -> None:
    session = ui_session.session
    assert limits_for(session) == Limits(6000, 0.9, "ui-test")
    session.context_limit = 10_000
    assert limits_for(session).threshold == 9000


def compaction(number: int, after: int, status: str = "succeeded") -> Compaction:
    return Compaction(number=number, tokens_after=after, status=status, created_at=NOW)


def test_runtime_line_drops_at_each_compaction() -> None:
    points, events = _series(
        [10] * 10,
        [(4, compaction(1, 15)), (6, compaction(2, 99, "reverted")), (8, compaction(3, 5))],
    )
    assert [(p.index, p.full) for p in points][-1] == (10, 100)
    before, after, first = events[0]
    assert (before.runtime, after.runtime, first.number) == (40, 15, 1)
    reverted_before, reverted_after, _ = events[1]
    assert reverted_before.runtime == reverted_after.runtime == 35  # no drop
    third_before, third_after, _ = events[2]
    assert (third_before.runtime, third_after.runtime) == (55, 5)
    assert points[-1].runtime == 25


def test_reserved_tokens_raise_both_lines_as_the_threshold_counts_them() -> None:
    # A proxied session: 50 tokens of system prompt and tools go with every call.
    points, events = _series([10] * 10, [(4, compaction(1, 15))], reserved=50)
    assert (points[0].full, points[0].runtime) == (50, 50)
    before, after, _ = events[0]
    assert (before.runtime, after.runtime) == (90, 65)  # the messages' 40 became 15
    assert (points[-1].full, points[-1].runtime) == (150, 125)


@pytest.mark.django_db
def test_timeline_marks_every_compaction(ui_session: UiSession) -> None:
    session = ui_session.session
    chart = token_timeline(session, limits_for(session))
    assert [m.number for m in chart.markers] == [1, 2]
    assert all(m.y_after > m.y_before for m in chart.markers)  # lower on screen: fewer tokens
    assert chart.full_total == session.history_tokens
    assert chart.message_count == session.message_count
    assert chart.limit_y < chart.threshold_y < chart.plot_bottom


@pytest.mark.django_db
def test_compare_rows_align_the_context_with_the_history(ui_session: UiSession) -> None:
    view = compare_view(ui_session.session)
    kinds = [(r.kind, r.first_seq, r.last_seq) for r in view.rows]
    outer = ui_session.outer
    assert outer.first_seq is not None
    assert outer.last_seq is not None
    assert kinds == [
        ("same", 0, 0),
        ("summary", outer.first_seq, outer.last_seq),
        ("same", outer.last_seq + 1, ui_session.session.message_count - 1),
    ]
    summary = view.rows[1]
    assert summary.compaction is not None
    assert summary.compaction.pk == outer.pk
    assert summary.count == outer.last_seq - outer.first_seq + 1
    assert summary.delta > 0
    assert view.tokens_now == ui_session.session.context_tokens
    assert view.tokens_before == ui_session.session.history_tokens
    assert view.messages_before == ui_session.session.message_count


@pytest.mark.django_db
def test_compare_shows_transformed_and_dropped_entries(user: Any) -> None:
    output = "big output line\n" * 20
    session = create_session(
        user, messages=[system(), user_message("go"), *exchange("c1", "Read", {}, output)]
    )
    offload_session(session, min_chars=100)
    ContextEntry.objects.filter(session=session, message__seq=1).delete()
    view = compare_view(session)
    kinds = [(r.kind, r.first_seq) for r in view.rows]
    assert kinds == [("same", 0), ("dropped", 1), ("same", 2), ("changed", 3)]
    changed = view.rows[-1]
    assert changed.now is not None
    assert changed.before is not None
    assert changed.now.blocks[0].result is not None
    assert changed.now.blocks[0].result.offloaded_to
    assert changed.before.blocks[0].result is not None
    assert "big output line" in changed.before.blocks[0].result.text


@pytest.mark.django_db
@pytest.mark.parametrize("sort", list(SORTS))
def test_every_sort_pages_through_everything_once(user: Any, sort: str) -> None:
    for index in range(7):
        Session.objects.create(
            owner=user,
            title=f"t{index % 3}",
            history_tokens=index % 2,
            context_tokens=index % 3,
            message_count=index % 2,
            compaction_count=index % 4,
        )
    seen: list[Any] = []
    cursor = ""
    for _ in range(10):
        page = session_page(
            Session.objects.filter(owner=user), sort=sort, cursor=cursor, limit=3, limits=limits_for
        )
        seen += [r.session.pk for r in page.rows]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == 7
    assert len(set(seen)) == 7
