"""The one compaction tree: the API's history and the history tab nest markers alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.compaction_tree import CompactionTree
from sessions_app.models import Compaction
from sessions_app.selectors.compactions import compaction_tree

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

Tree = dict[int, "Tree"]


def _failed_between(ui_session: UiSession) -> None:
    """A failed compaction recorded as the inner one's parent, under the outer one."""
    inner, outer = ui_session.inner, ui_session.outer
    failed = Compaction.objects.create(
        session=ui_session.session,
        number=3,
        created_at=outer.created_at,
        trigger=outer.trigger,
        status=Compaction.Status.FAILED,
        first_seq=inner.first_seq,
        last_seq=outer.last_seq,
        parent=outer,
    )
    Compaction.objects.filter(pk=inner.pk).update(parent=failed)


def _failed_parent_at_top(ui_session: UiSession) -> None:
    """The inner one's recorded parent failed and has no parent of its own."""
    Compaction.objects.filter(pk=ui_session.outer.pk).update(status=Compaction.Status.FAILED)


def _unchanged(ui_session: UiSession) -> None:
    pass


def api_tree(client: Client, session_id: Any) -> Tree:
    body = client.get(f"/api/sessions/{session_id}/history?limit=1000").json()

    def nest(markers: list[dict[str, Any]]) -> Tree:
        return {m["number"]: nest(m["children"]) for m in markers}

    return nest(body["compactions"])


def page_tree(client: Client, session_id: Any, ui: Any) -> Tree:
    def level(number: int) -> Tree:
        url = reverse("ui:compaction_originals", args=[session_id, number])
        html = client.get(url, HTTP_HX_REQUEST="true").content
        return {n: level(n) for n in ui.compaction_numbers(html)}

    top = client.get(reverse("ui:session", args=[session_id])).content
    return {n: level(n) for n in ui.compaction_numbers(top)}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_unchanged, {2: {1: {}}}),
        (_failed_between, {2: {1: {}}}),
        (_failed_parent_at_top, {1: {}}),
    ],
    ids=["nested", "failed-parent-between", "failed-parent-at-top"],
)
def test_api_and_page_show_the_same_tree(
    ui_session: UiSession,
    logged_in: Client,
    ui: Any,
    change: Callable[[UiSession], None],
    expected: Tree,
) -> None:
    change(ui_session)
    pk = ui_session.session.pk
    assert api_tree(logged_in, pk) == expected
    assert page_tree(logged_in, pk, ui) == expected


def test_failed_and_reverted_compactions_are_not_in_the_tree(ui_session: UiSession) -> None:
    _failed_between(ui_session)
    tree = compaction_tree(ui_session.session)
    assert sorted(c.number for c in tree.active.values()) == [1, 2]
    failed = tree.by_number[3]
    assert tree.children(failed) == []
    inner = tree.by_number[1]
    parent = tree.parent(inner)
    assert parent is not None
    assert parent.number == 2
    assert tree.depth(inner) == 1
    assert not tree.is_top_level(inner)


def test_a_parent_cycle_in_stored_data_ends(ui_session: UiSession) -> None:
    inner, outer = ui_session.inner, ui_session.outer
    Compaction.objects.filter(pk=outer.pk).update(status=Compaction.Status.FAILED, parent=inner)
    Compaction.objects.filter(pk=inner.pk).update(parent=outer)
    rows = list(Compaction.objects.filter(session=ui_session.session))
    outer_row = next(c for c in rows if c.pk == outer.pk)
    outer_row.parent_id = inner.pk  # a failed parent whose own parent is the child
    tree = CompactionTree(rows)
    assert [c.number for c in tree.roots] == [inner.number]


def test_succeeded_compactions_in_a_cycle_are_all_shown(ui_session: UiSession) -> None:
    inner, outer = ui_session.inner, ui_session.outer
    Compaction.objects.filter(pk=outer.pk).update(parent=inner)
    tree = compaction_tree(ui_session.session)
    shown = [c.number for c in tree.roots]
    shown += [child.number for root in tree.roots for child in tree.children(root)]
    assert sorted(shown) == [inner.number, outer.number]
