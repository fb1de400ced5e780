"""The views' one mapping of the service error tree (sessions_app/views/failures.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.http import Http404, HttpRequest, HttpResponse
from django.test import RequestFactory
from django_htmx.middleware import HtmxDetails

from compaction import PolicyError, SummaryError
from sessions_app.services.errors import Conflict, InvalidInput, NotFound, Unavailable
from sessions_app.views.failures import service_errors


def _view(error: Exception) -> Any:
    @service_errors
    def view(request: HttpRequest) -> HttpResponse:
        raise error

    return view


def _request(htmx: bool) -> HttpRequest:
    headers = {"HX-Request": "true"} if htmx else {}
    request = RequestFactory().post("/sessions/x/compact/", headers=headers)
    request.user = AnonymousUser()
    request.htmx = HtmxDetails(request)  # type: ignore[attr-defined]
    return request


@pytest.mark.parametrize(
    ("error", "status", "text"),
    [
        (InvalidInput.field("profile", "Unknown profile 'x'."), 422, "Unknown profile"),
        (Conflict("revert #2 first", blocking=2), 409, "revert #2 first"),
        (Unavailable("summary model down", retry_after=7), 503, "summary model down"),
    ],
)
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "page"])
def test_each_error_has_its_status_and_says_why(
    error: Exception, status: int, text: str, htmx: bool
) -> None:
    response = _view(error)(_request(htmx))
    html = response.content.decode()
    assert response.status_code == status
    assert text in html
    assert 'class="notice notice-error"' in html
    assert ("<html" in html) is not htmx
    if status == 503:
        assert int(response["Retry-After"]) > 0
    if isinstance(error, Unavailable):
        assert response["Retry-After"] == "7"


def test_not_found_is_the_404_page() -> None:
    with pytest.raises(Http404):
        _view(NotFound("no such job"))(_request(False))


def test_other_errors_are_not_swallowed() -> None:
    with pytest.raises(RuntimeError):
        _view(RuntimeError("a bug"))(_request(True))


@pytest.mark.parametrize(
    "error",
    [SummaryError("the model failed"), PolicyError("context_limit", "too small")],
    ids=["summary", "policy"],
)
def test_an_engine_error_reaching_a_view_is_a_bug_not_a_notice(error: Exception) -> None:
    # Services translate the engine's errors (services/errors.py `engine_error`).
    with pytest.raises(type(error)):
        _view(error)(_request(True))
