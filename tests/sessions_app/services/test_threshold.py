"""services/sessions/threshold.py: one answer to "is this session over its threshold?" (issue 24
item 1).

The page's gauge, the list's usage bar, the API's session answer and the pre-call check all
say what the engine's `Policy.over_threshold` says, the profile's `safety_factor` and
`enabled` included; and no other module of sessions_app/ compares against a threshold or a
limit (an `ast` walk).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.api.serializers import session_dict
from sessions_app.models import CompactionProfile, Session
from sessions_app.services.context.runtime import check
from sessions_app.services.sessions.policies import policy_for
from sessions_app.services.sessions.threshold import (
    reserved_over_threshold,
    session_standing,
    shown_standing,
    usage_over_threshold,
)
from sessions_app.views.session_detail import overview_context

ROOT: Final = Path(__file__).resolve().parents[3]
APP: Final = ROOT / "sessions_app"
#: The owner of the rule, and the engine's Policy it asks.
OWNERS: Final = {APP / "services" / "sessions" / "threshold.py"}
#: Attributes that hold a threshold or a limit, and the Policy methods that decide with them.
LIMIT_ATTRIBUTES: Final = {"threshold", "context_limit", "hard_limit", "effective_hard_limit"}
DECIDING_METHODS: Final = {"over_threshold", "over_hard_limit", "scaled"}
ORDERING: Final = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)

#: (profile fields, context tokens as a share of the limit, whether the engine compacts).
CASES: Final[dict[str, tuple[dict[str, Any], float, bool]]] = {
    # 70% of the window counted 1.5 times is 105%: the engine compacts; the gauge said
    # "under the threshold" (70% < 90%).
    "safety_factor": ({"safety_factor": 1.5}, 0.7, True),
    # Disabled: the engine never compacts; the gauge said "over" at 95%.
    "disabled": ({"enabled": False}, 0.95, False),
    "over": ({}, 0.95, True),
    "under": ({}, 0.5, False),
}


def _session(make_session: Any, make_profile: Any, fields: dict[str, Any], share: float) -> Any:
    """A session whose context is `share` of its limit under a profile with `fields`."""
    session = make_session(profile=make_profile(trigger_ratio=0.9, **fields))
    session.context_limit = int(session.context_tokens / share)
    session.save(update_fields=["context_limit"])
    return Session.objects.select_related("profile").get(pk=session.pk)


def _engine_compacts(session: Session) -> bool:
    """The engine's own answer: the session's Policy, asked directly."""
    policy = policy_for(session)
    return policy.enabled and policy.over_threshold(session.context_tokens)


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES)
def test_the_gauge_says_what_the_engine_decides(
    make_session: Any, make_profile: Any, case: str
) -> None:
    fields, share, compacts = CASES[case]
    session = _session(make_session, make_profile, fields, share)
    assert _engine_compacts(session) is compacts
    assert check(session).should_compact is compacts
    assert overview_context(session)["gauge"].over_threshold is compacts


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES)
def test_the_pages_draw_the_engines_answer(
    make_session: Any, make_profile: Any, user: Any, case: str
) -> None:
    fields, share, compacts = CASES[case]
    session = _session(make_session, make_profile, fields, share)
    client = Client()
    client.force_login(user)
    detail = client.get(reverse("ui:session", args=[session.pk])).content.decode()
    assert bool(re.search(r'<dd class="hot">', detail)) is compacts
    listing = client.get(reverse("ui:session_list")).content.decode()
    assert ("usage-bar usage-hot" in listing) is compacts


@pytest.mark.django_db
def test_the_api_and_the_check_give_the_engines_limit_and_threshold(
    make_session: Any, make_profile: Any
) -> None:
    session = _session(make_session, make_profile, {"safety_factor": 1.5}, 0.7)
    answer, status = session_dict(session), check(session)
    assert (answer["context_limit"], answer["threshold"]) == (status.limit, status.threshold)
    assert status.threshold == policy_for(session).threshold


@pytest.mark.django_db
def test_a_profile_the_engine_refuses_still_shows_its_limits(
    make_session: Any, make_profile: Any, user: Any
) -> None:
    session = _session(make_session, make_profile, {}, 0.95)
    # Written around the admin's checks: a trigger ratio the engine refuses.
    CompactionProfile.objects.filter(pk=session.profile_id).update(trigger_ratio=0.0)
    session = Session.objects.select_related("profile").get(pk=session.pk)
    shown = shown_standing(session)
    assert (shown.context_limit, shown.threshold, shown.over_threshold) == (
        session.context_limit,
        0,
        False,
    )
    client = Client()
    client.force_login(user)
    assert client.get(reverse("ui:session", args=[session.pk])).status_code == 200
    assert session_dict(session)["threshold"] == 0


@pytest.mark.django_db
def test_reported_usage_and_reserved_tokens(make_session: Any, make_profile: Any) -> None:
    session = _session(make_session, make_profile, {}, 0.5)
    policy = policy_for(session).replace(reserved_tokens=100)
    threshold = policy.threshold
    # A model's reported usage holds the reserved tokens already: not added twice.
    assert usage_over_threshold(policy, threshold)
    assert not usage_over_threshold(policy, threshold - 1)
    assert not reserved_over_threshold(policy)
    assert reserved_over_threshold(policy.replace(reserved_tokens=threshold))
    # Fresh counts from the row replace the loaded session's.
    fresh = session_standing(session, counts=(threshold - 100, 100))
    assert (fresh.tokens, fresh.over_threshold) == (threshold, True)


def _limit_attributes(node: ast.AST) -> Iterator[str]:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Attribute) and inner.attr in LIMIT_ATTRIBUTES:
            yield inner.attr


def _method(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def decisions_outside_the_owner(path: Path, root: Path = ROOT) -> list[str]:
    """Each ordering comparison against a threshold or limit attribute, and each call of a
    Policy method that decides with them, in `path` (as `file:line: what`, in line order)."""
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare) and any(isinstance(op, ORDERING) for op in node.ops):
            attrs = sorted(set(_limit_attributes(node)))
            if attrs:
                found.append((node.lineno, node.col_offset, f"compares against {', '.join(attrs)}"))
        elif isinstance(node, ast.Call) and _method(node) in DECIDING_METHODS:
            found.append((node.lineno, node.col_offset, f"calls .{_method(node)}()"))
    where = path.relative_to(root)
    return [f"{where}:{line}: {what}" for line, _, what in sorted(found)]


def test_no_module_but_the_owner_decides_over_a_threshold() -> None:
    sources = sorted(p for p in APP.rglob("*.py") if "migrations" not in p.parts)
    found = [line for p in sources if p not in OWNERS for line in decisions_outside_the_owner(p)]
    assert found == [], "ask services/sessions/threshold.py instead:\n" + "\n".join(found)


def test_the_walk_finds_the_shapes_it_forbids(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "a = policy.scaled(t) >= policy.threshold\n"
        "b = total < limits.context_limit * 2\n"
        "c = policy.over_hard_limit(t)\n"
        "d = session.context_limit != profile.context_limit\n"  # not a decision
    )
    found = [line.split(": ", 1)[1] for line in decisions_outside_the_owner(sample, tmp_path)]
    assert found == [
        "calls .scaled()",
        "compares against threshold",
        "compares against context_limit",
        "calls .over_hard_limit()",
    ]
