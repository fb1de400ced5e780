"""Compaction.Kind: an offload's record is told apart in one place, the model (issue 24 item 5)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from sessions_app.models import Compaction, Session

ROOT = Path(__file__).resolve().parents[2]
#: `strategy` compared with the literal "offload", or the old module constant.
_TOLD_APART = re.compile(r"""strategy\s*(?:==|!=|=)\s*["']offload["']|OFFLOAD_STRATEGY""")
#: Takes a migration's historical models, which have neither the Kind nor the properties.
_EXEMPT = {Path("sessions_app/services/importing/dedupe.py")}


def test_the_kind_follows_the_stored_strategy() -> None:
    offload = Compaction(strategy="offload")
    point = Compaction(strategy="balanced: selective+summary")
    assert offload.kind == Compaction.Kind.OFFLOAD
    assert offload.is_offload
    assert not offload.is_point
    assert point.kind == Compaction.Kind.COMPACTION
    assert point.is_point
    assert not point.is_offload
    assert Compaction(strategy="imported").is_point


@pytest.mark.django_db
def test_the_queryset_splits_by_kind(make_session: Callable[..., Session]) -> None:
    session = make_session()
    common = {"session": session, "created_at": session.created_at, "trigger": "manual"}
    Compaction.objects.create(number=1, strategy="offload", **common)
    Compaction.objects.create(number=2, strategy="balanced: summary", **common)
    rows = Compaction.objects.filter(session=session)
    assert [c.number for c in rows.offloads()] == [1]
    assert [c.number for c in rows.points()] == [2]
    assert [c.number for c in session.compactions.points()] == [2]


def test_no_module_tells_an_offload_apart_by_its_strategy_string() -> None:
    found = []
    sources = [*(ROOT / "sessions_app").rglob("*.py"), *(ROOT / "templates").rglob("*.html")]
    for path in sources:
        relative = path.relative_to(ROOT)
        if "migrations" in relative.parts or relative in _EXEMPT:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _TOLD_APART.search(line) and relative != Path("sessions_app/models.py"):
                found.append(f"{relative}:{number}: {line.strip()}")
    assert found == [], "use Compaction.Kind / is_offload / .offloads() / .points()"
