"""Numbers to trust (issue 29 item 3): a growth is never printed as a saving, the preview's
steps line ends without a comma, a re-predicted summary says why its figure differs, and the
admin's new profile starts from the `balanced` preset."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse

from compaction import Policy
from sessions_app.admin_forms import RATIO_FIELDS, percent_text
from sessions_app.models import CompactionProfile
from sessions_app.templatetags.ctxweb_ui import change_class, token_change
from sessions_app.viewmodels.compare import CompareRow, CompareView

if TYPE_CHECKING:
    from tests.sessions_app.conftest_ui import UiSession

pytest_plugins = ["tests.sessions_app.conftest_ui"]
pytestmark = pytest.mark.django_db

MINUS = "\u2212"
PROPOSED = "Proposed summary: the CLI uses the new parser."
EDITED = "Edited summary: the CLI uses the new parser; src/cli_3.py still has the old import."


def test_token_change_follows_the_direction() -> None:
    assert token_change(106, 61) == f"{MINUS}45"
    assert token_change(16, 61) == "+45"
    assert token_change(61, 61) == "\u00b10"
    assert token_change(12_000, 600) == f"{MINUS}11.4k"
    assert token_change("x", 1) == ""
    assert change_class(16, 61) == "growth"
    assert change_class(61, 16) == "saving"


def _compare_html(ui_session: UiSession, rows: list[CompareRow], now: int, before: int) -> str:
    view = CompareView(rows=rows, tokens_now=now, entries_now=1, tokens_before=before)
    context = {"session": ui_session.session, "compare": view}
    return render_to_string("sessions/_compare.html#tab", context)


def _cell(html: str) -> str:
    match = re.search(r'<small class="([^"]+)" data-row-change>([^<]*)</small>', html)
    assert match, html
    return f"{match.group(1)} {match.group(2)}"


def test_a_row_that_grew_is_shown_as_growth(ui_session: UiSession) -> None:
    grew = CompareRow("changed", first_seq=3, last_seq=3, count=1, tokens_now=61, tokens_before=16)
    html = _compare_html(ui_session, [grew], now=61, before=16)
    assert _cell(html) == "growth +45"
    assert f"{MINUS}-" not in html
    assert f"{MINUS}+" not in html
    label = r'<span class="side-label">(\w+)</span><span class="mono big (\w+)"[^>]*>([^<]*)<'
    total = re.search(label, html)
    assert total is not None
    assert total.groups() == ("Grown", "growth", "+45")


def test_a_row_that_shrank_is_still_a_saving(ui_session: UiSession) -> None:
    shrank = CompareRow("changed", 3, 3, count=1, tokens_now=61, tokens_before=106)
    html = _compare_html(ui_session, [shrank], now=61, before=106)
    assert _cell(html) == f"saving {MINUS}45"
    assert '<span class="side-label">Saved</span>' in html


def _preview(client: Client, ui_session: UiSession, **data: str) -> str:
    url = reverse("ui:compact_preview", args=[ui_session.session.pk])
    response = client.post(url, {"profile": "", **data}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200, response.content
    return response.content.decode()


def _with_steps(ui_session: UiSession, steps: list[str]) -> None:
    profile = ui_session.session.profile
    assert profile is not None
    CompactionProfile.objects.filter(pk=profile.pk).update(steps=steps)


def test_the_steps_line_never_ends_with_a_comma(
    ui_session: UiSession, logged_in: Client, scripted: Any
) -> None:
    scripted(default=PROPOSED)
    # The last step of the chain does not run (the summary brought the context under the
    # threshold): the line used to end with ", ".
    _with_steps(ui_session, ["selective", "summary", "smart_truncate"])
    html = _preview(logged_in, ui_session)
    line = re.search(r"<p [^>]*data-preview-steps>(.*?)</p>", html, re.S)
    assert line is not None
    text = re.sub(r"<[^>]+>", "", line.group(1)).strip()
    assert text.startswith("Steps: selective")
    assert "summary" in text
    assert not text.endswith(",")
    assert "smart_truncate" not in text


def test_a_written_summary_is_predicted_before_it_is_applied(
    ui_session: UiSession, logged_in: Client, scripted: Any
) -> None:
    scripted(default=PROPOSED)
    _with_steps(ui_session, ["selective", "summary"])
    first = _preview(logged_in, ui_session)
    earlier = re.search(r'id="preview-earlier-tokens" value="(\d+)"', first)
    assert earlier is not None
    button = first[first.index('id="repredict-button"') :]
    assert 'hx-include="#compact-form, #preview-summary-edit, #preview-earlier-tokens' in button
    steps = re.search(r'id="preview-earlier-steps" value="([^"]*)"', first)
    assert steps is not None

    again = _preview(
        logged_in,
        ui_session,
        summary=EDITED,
        earlier_tokens=earlier.group(1),
        earlier_steps=steps.group(1),
    )
    assert "Preview with your summary" in again
    note = re.search(r'<p [^>]*data-repredicted="(\d+)">(.*?)</p>', again, re.S)
    assert note is not None
    assert note.group(1) == earlier.group(1)
    assert "With your summary" in note.group(2)
    # What is applied is the text that was previewed, not whatever the box holds later.
    hidden = re.search(r'name="summary" id="previewed-summary" value="([^"]*)"', again)
    assert hidden is not None
    assert hidden.group(1) == EDITED
    apply = again[again.index('id="apply-summary-button"') :]
    assert 'hx-include="#compact-form, #previewed-summary"' in apply[: apply.index(">")]
    assert 'id="commit-button"' not in again


def test_a_repredicted_figure_that_differs_says_why(
    ui_session: UiSession, logged_in: Client, scripted: Any
) -> None:
    scripted(default=PROPOSED)
    again = _preview(
        logged_in, ui_session, summary=EDITED, earlier_tokens="7", earlier_steps="selective"
    )
    note = re.search(r"<p [^>]*data-repredicted=\"7\">(.*?)</p>", again, re.S)
    assert note is not None
    text = re.sub(r"<[^>]+>", "", note.group(1))
    assert "not the 7 predicted before" in text
    assert "summary step alone" in text
    assert "selective does not run" in text


def test_the_admin_add_form_starts_from_the_balanced_preset(admin_client: Client) -> None:
    html = admin_client.get(reverse("admin:sessions_app_compactionprofile_add")).content.decode()
    balanced = Policy.preset("balanced")
    for name in RATIO_FIELDS:
        field = re.search(rf'<input[^>]*name="{name}"[^>]*>', html)
        assert field is not None, name
        value = re.search(r'value="([^"]*)"', field.group(0))
        assert value is not None, f"{name} has no initial value"
        assert value.group(1) == percent_text(getattr(balanced, name))


def _poller(html: str) -> tuple[str, str]:
    tag = re.search(r'<div id="live-session"[^>]*>', html)
    assert tag is not None
    stamp = re.search(r'data-stamp="([^"]+)"', tag.group(0))
    limits = re.search(r'data-limits="([^"]+)"', tag.group(0))
    assert stamp is not None
    assert limits is not None
    return stamp.group(1), limits.group(1)


def test_the_live_poll_carries_a_threshold_change(
    ui_session: UiSession, logged_in: Client, django_assert_max_num_queries: Any
) -> None:
    session = ui_session.session
    page = logged_in.get(reverse("ui:session", args=[session.pk])).content.decode()
    stamp, limits = _poller(page)
    url = reverse("ui:session_changes", args=[session.pk])
    asked = f"{url}?since={stamp}&tab=history&limits={limits}"
    assert logged_in.get(asked, HTTP_HX_REQUEST="true").status_code == 204
    profile = session.profile
    assert profile is not None
    # An admin lowers the threshold: the session's stamp does not move.
    CompactionProfile.objects.filter(pk=profile.pk).update(trigger_ratio=0.5)

    plain = f"{url}?since={stamp}&tab=history"
    with django_assert_max_num_queries(3):  # the polls without `limits` stay cheap
        assert logged_in.get(plain, HTTP_HX_REQUEST="true").status_code == 204
    response = logged_in.get(asked, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="overview"' in html
    assert "threshold 3k (50%)" in html
    new_stamp, new_limits = _poller(html)
    assert new_stamp == stamp
    assert new_limits != limits
    again = f"{url}?since={stamp}&tab=history&limits={new_limits}"
    assert logged_in.get(again, HTTP_HX_REQUEST="true").status_code == 204


@pytest.mark.parametrize(
    ("tokens", "steps"),
    [("abc", "selective"), ("-5", "selective"), ("9" * 13, "selective"), ("7", "<b>x</b>,y z")],
)
def test_a_bad_earlier_prediction_is_ignored_not_echoed(
    ui_session: UiSession, logged_in: Client, scripted: Any, tokens: str, steps: str
) -> None:
    scripted(default=PROPOSED)
    html = _preview(
        logged_in, ui_session, summary=EDITED, earlier_tokens=tokens, earlier_steps=steps
    )
    assert "<b>x</b>" not in html
    note = re.search(r"<p [^>]*data-repredicted=\"(\d+)\">(.*?)</p>", html, re.S)
    if tokens == "7":  # a good figure with bad step names: the names are dropped
        assert note is not None
        assert "do not run" not in note.group(2)
        assert "does not run" not in note.group(2)
    else:
        assert note is None
