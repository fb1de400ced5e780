"""Small things a daily user trips on (issue 29 item 4): /favicon.ico answers on every page
(the admin's too), and drop labels crowded at one message never overlap."""

from __future__ import annotations

import itertools

import pytest
from django.test import Client

from sessions_app.viewmodels.timeline import (
    HIT_WIDTH,
    LABEL_ROW,
    ChartMarker,
    _stagger_labels,
)

pytestmark = pytest.mark.django_db

#: A 10-unit label's box is about this tall (ascent and descent of the monospace font).
LABEL_BOX = 11.5


def test_favicon_answers_for_every_page(client: Client, admin_client: Client) -> None:
    for who in (client, admin_client):
        response = who.get("/favicon.ico", follow=True)
        assert response.status_code == 200
        body = b"".join(response.streaming_content)  # type: ignore[attr-defined]
        assert body[:4] == b"\x00\x00\x01\x00"  # an ICO file
    page = admin_client.get("/").content.decode()
    assert 'rel="icon" href="/static/favicon.ico"' in page


def _marker(number: int, x: float) -> ChartMarker:
    return ChartMarker(number, x, 50.0, 90.0, 900, 400, "auto", reverted=False)


def test_drop_labels_at_one_message_never_overlap() -> None:
    placed = _stagger_labels([_marker(n, 300.0) for n in range(1, 7)])
    shown = [m for m in placed if m.labelled]
    assert len(shown) == 3
    rows = sorted(m.label_y for m in shown)
    assert all(b - a >= LABEL_BOX for a, b in itertools.pairwise(rows))
    assert min(rows) >= 8  # the top row's digits (8 units above their baseline) stay inside
    assert LABEL_ROW >= LABEL_BOX
    # Unlabelled drops still have their line and their tap target.
    for marker in placed:
        assert marker.hit_height >= 24
        assert marker.hit_x == pytest.approx(marker.x - HIT_WIDTH / 2)


def test_drop_labels_far_apart_share_the_first_row() -> None:
    placed = _stagger_labels([_marker(1, 100.0), _marker(2, 200.0), _marker(3, 300.0)])
    assert {m.label_y for m in placed} == {placed[0].label_y}
    assert all(m.labelled for m in placed)
