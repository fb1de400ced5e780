"""The history: windows of the top level, nested markers, tool rows, thinking, full contents."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.models import Compaction
from sessions_app.services.compacting.offloading import offload_session
from sessions_app.services.compacting.reverting import revert_compaction
from sessions_app.services.sessions.lifecycle import create_session
from sessions_app.viewmodels.history import PAGE_SIZE, MarkerTree, history_window
from tests.support.histories import assistant, exchange, system
from tests.support.histories import user as user_message

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db


def seqs(html: str) -> list[int]:
    """The seq of every message article in `html`, in order."""
    return [
        int(s) for s in re.findall(r'<article class="msg[^"]*" id="[^"]*" data-seq="(\d+)"', html)
    ]


def long_history(rounds: int) -> list[dict[str, Any]]:
    messages = [system()]
    for index in range(rounds):
        messages += [
            user_message(f"task {index}"),
            *exchange(f"t{index}", "Bash", {"command": f"make {index}"}),
        ]
        messages.append(assistant(f"done {index}"))
    return messages


GAP_LINK = re.compile(r'hx-get="(/sessions/[^"]+/(?:history|originals)/\?lo=[^"]+)"')


def test_top_level_opens_gaps_backwards_without_splitting_tool_pairs(
    logged_in: Client, user: Any
) -> None:
    session = create_session(user, messages=long_history(30))  # 121 messages
    page = logged_in.get(reverse("ui:session", args=[session.pk])).content.decode()
    shown: list[int] = []
    html = page
    for _ in range(10):
        window = seqs(html)
        # A window never starts on a tool_result message: the call is in the same window.
        assert window
        assert window[0] % 4 != 3, window[0]
        shown = window + shown
        match = GAP_LINK.search(html)
        if not match:
            break
        url = match.group(1).replace("&amp;", "&")
        html = logged_in.get(url, HTTP_HX_REQUEST="true").content.decode()
    # Tool-result messages are drawn inside their calls' rows, not as their own rows.
    expected = [s for s in range(121) if s % 4 != 3]
    assert shown == expected
    assert len(seqs(page)) <= PAGE_SIZE + 1
    assert "earlier messages" in page


def test_window_keeps_tool_call_with_result_at_the_edge(user: Any) -> None:
    session = create_session(user, messages=long_history(5))  # seqs 0..20
    window = history_window(session, limit=3)
    assert [item.kind for item in window.items] == ["gap", "message", "message", "message"]
    assert [item.seq for item in window.items[1:]] == [18, 19, 20]  # type: ignore[union-attr]
    gap = window.gaps[0]
    assert (gap.first_seq, gap.last_seq, gap.count) == (0, 17, 18)
    # The gap's newest 3 would start on a tool result (15): the call (14) comes along.
    older = history_window(session, lo=gap.lo, hi=gap.hi, limit=3)
    assert older.items[0].kind == "gap"
    assert [item.seq for item in older.items[1:]] == [14, 15, 16, 17]  # type: ignore[union-attr]
    assert older.gaps[0].count == 14


def test_every_top_level_marker_shows_with_gaps_between(
    ui_session: UiSession, logged_in: Client, ui: Any
) -> None:
    from sessions_app.services.sessions.lifecycle import append_messages

    append_messages(ui_session.session, long_history(20)[1:])  # 80 more messages
    html = logged_in.get(reverse("ui:session", args=[ui_session.session.pk])).content.decode()
    assert ui.compaction_numbers(html) == [ui_session.outer.number]
    marker_at = html.index(f'data-compaction="{ui_session.outer.number}"')
    gap = GAP_LINK.search(html)
    assert gap
    assert marker_at < gap.start()
    assert html.index('data-seq="0"') < marker_at
    opened = logged_in.get(gap.group(1).replace("&amp;", "&"), HTTP_HX_REQUEST="true")
    assert seqs(opened.content.decode())
    assert 'data-compaction="' not in opened.content.decode()


def test_markers_nest_and_originals_exclude_nested_ranges(
    ui_session: UiSession, logged_in: Client, ui: Any
) -> None:
    pk = ui_session.session.pk
    outer, inner = ui_session.outer, ui_session.inner
    assert inner.parent_id == outer.pk
    assert outer.last_seq is not None
    assert inner.first_seq is not None
    assert inner.last_seq is not None
    top = logged_in.get(reverse("ui:session", args=[pk])).content.decode()
    assert ui.compaction_numbers(top) == [outer.number]
    assert all(s > outer.last_seq or s == 0 for s in seqs(top))
    originals = logged_in.get(
        reverse("ui:compaction_originals", args=[pk, outer.number]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert ui.compaction_numbers(originals) == [inner.number]
    shown = seqs(originals)
    assert shown
    assert all(inner.last_seq < s <= outer.last_seq for s in shown)
    # The nested marker sits in its place: before the messages after its range.
    assert originals.index('data-compaction="1"') < originals.index(f'data-seq="{shown[0]}"')
    inner_originals = logged_in.get(
        reverse("ui:compaction_originals", args=[pk, inner.number]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert ui.compaction_numbers(inner_originals) == []
    assert seqs(inner_originals)[0] == inner.first_seq
    assert all(inner.first_seq <= s <= inner.last_seq for s in seqs(inner_originals))


def test_marker_depth_and_child_count(ui_session: UiSession) -> None:
    tree = MarkerTree.for_session(ui_session.session)
    assert tree.depth(ui_session.outer) == 0
    assert tree.depth(ui_session.inner) == 1
    assert tree.marker(ui_session.outer).child_count == 1
    assert tree.descendant_count(ui_session.outer) == 1
    assert [c.number for c in tree.children(None)] == [ui_session.outer.number]


def test_reverting_the_outer_marker_lifts_the_inner_one(
    ui_session: UiSession, logged_in: Client, ui: Any
) -> None:
    revert_compaction(ui_session.session, ui_session.outer.number)
    top = logged_in.get(reverse("ui:session", args=[ui_session.session.pk])).content.decode()
    assert ui.compaction_numbers(top) == [ui_session.inner.number]
    # Messages the outer one folded are back at the top level.
    assert ui_session.outer.last_seq in seqs(top)


def test_reverted_parent_without_relink_still_nests_under_nearest_active(
    ui_session: UiSession,
) -> None:
    """A child whose parent is not succeeded hangs from the nearest succeeded ancestor."""
    Compaction.objects.filter(pk=ui_session.outer.pk).update(status="reverted")
    tree = MarkerTree.for_session(ui_session.session)
    assert [c.number for c in tree.children(None)] == [ui_session.inner.number]


def test_rangeless_imported_marker_is_placed_by_time(ui_session: UiSession) -> None:
    session = ui_session.session
    last = session.messages.order_by("-seq").first()
    assert last is not None
    imported = Compaction.objects.create(
        session=session,
        number=9,
        created_at=last.created_at,
        trigger="imported",
        summary="imported summary",
        tokens_before=1000,
        tokens_after=100,
    )
    window = history_window(session)
    kinds = [(i.kind, getattr(i, "number", None)) for i in window.items]
    assert kinds[-1] == ("marker", imported.number)


def test_tool_call_is_one_line_that_expands(ui_session: UiSession, logged_in: Client) -> None:
    html = logged_in.get(
        reverse("ui:compaction_originals", args=[ui_session.session.pk, ui_session.outer.number])
    ).content.decode()
    row = html[html.index('<div class="block tool is-error">') :]
    row = row[: row.index("The command failed")]
    assert 'aria-expanded="false"' in row
    assert "cat src/app.py" in row  # the key argument
    assert 'class="badge error">error<' in row
    assert "chars</span>" in row  # the result size
    detail = row[row.index('class="tool-detail"') :]
    assert "hidden" in detail[:120]
    assert "Traceback: boom" in detail
    assert "&quot;command&quot;: &quot;cat src/app.py&quot;" in detail
    # The result message is drawn inside the call: no separate row for seq 15.
    assert 'data-seq="15"' not in html


def test_thinking_is_collapsed(ui_session: UiSession, logged_in: Client) -> None:
    html = logged_in.get(
        reverse("ui:compaction_originals", args=[ui_session.session.pk, ui_session.outer.number])
    ).content.decode()
    block = html[html.index('class="block thinking"') :]
    block = block[: block.index("</div>\n    </div>") + 1]
    assert '<button type="button" class="expander line" aria-expanded="false"' in block
    assert re.search(r'class="text thinking-text" id="[^"]+" hidden hx-disable>', block)


def test_long_text_and_output_load_in_full_on_demand(logged_in: Client, user: Any) -> None:
    text = "word " * 1000
    output = "line\n" * 1000
    session = create_session(
        user,
        messages=[
            system(),
            user_message(text),
            *exchange("big", "Bash", {"command": "ls"}, output),
        ],
    )
    page = logged_in.get(reverse("ui:session", args=[session.pk])).content.decode()
    assert text not in page
    assert "Show all 5000 characters" in page
    assert output not in page
    full = logged_in.get(reverse("ui:message", args=[session.pk, 1])).content.decode()
    assert text.strip() in full
    assert "Show all" not in full
    whole = logged_in.get(reverse("ui:tool_result", args=[session.pk, 3, "big"])).content.decode()
    assert whole.count("line") == 1000
    assert logged_in.get(reverse("ui:tool_result", args=[session.pk, 3, "nope"])).status_code == 404
    assert logged_in.get(reverse("ui:message", args=[session.pk, 99])).status_code == 404


def test_offloaded_results_link_to_their_content(logged_in: Client, user: Any) -> None:
    output = "offloaded output line\n" * 20
    session = create_session(
        user,
        messages=[
            system(),
            user_message("go"),
            *exchange("off1", "Read", {"file_path": "a.py"}, output),
        ],
    )
    result = offload_session(session, min_chars=100)
    assert result.offloaded_count == 1
    compare = logged_in.get(
        reverse("ui:tab", args=[session.pk, "compare"]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'class="badge offloaded"' in compare
    link = re.search(r'href="(/sessions/[^"]+/offloaded/[^"]+)"', compare)
    assert link
    content = logged_in.get(link.group(1))
    assert content.status_code == 200
    assert content["Content-Type"].startswith("text/plain")
    assert b"offloaded output line" in content.content
    missing = reverse("ui:offloaded", args=[session.pk, "../../etc/passwd"])
    assert logged_in.get(missing).status_code == 404


def test_message_range_for_the_compare_tab(ui_session: UiSession, logged_in: Client) -> None:
    url = reverse("ui:message_range", args=[ui_session.session.pk])
    html = logged_in.get(f"{url}?first=1&last=4", HTTP_HX_REQUEST="true").content.decode()
    assert seqs(html) == [1, 2, 4]  # 3 is the result of the call in 2
    assert logged_in.get(url).status_code == 404
