"""Odd names are refused naming the field, never a 500 (issue 30 item 6): an uploaded
transcript whose file name is very long, and a profile whose `encoding` is a path."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.client import MULTIPART_CONTENT

from sessions_app.models import CompactionProfile, Session
from tests.sessions_app.conftest import JsonClient
from tests.sessions_app.test_admin import form_data

pytestmark = pytest.mark.django_db

CHAT = b'[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."}]'
ODD = "../../etc/passwd"


def _upload(client: Any, name: str, url: str = "/api/sessions/import") -> Any:
    upload = io.BytesIO(CHAT)
    upload.name = name
    return client.post(url, {"file": upload, "format": "openai"}, content_type=MULTIPART_CONTENT)


@pytest.mark.parametrize("name", ["a" * 1000 + ".json", "é" * 600 + ".json", "b" * 5000])
def test_an_upload_with_a_very_long_file_name_is_422_naming_the_file(
    api_client: JsonClient, name: str
) -> None:
    response = _upload(api_client, name)
    assert response.status_code == 422, response.content
    detail = response.json()["detail"]
    assert detail[0]["path"] == "file"
    assert "file name" in detail[0]["message"]
    assert not Session.objects.exists()


def test_a_long_file_name_that_django_reads_is_imported_under_a_shorter_name(
    api_client: JsonClient,
) -> None:
    response = _upload(api_client, "c" * 250 + ".json")
    assert response.status_code == 201, response.content
    session = Session.objects.get()
    assert str(session.raw_source.name).endswith(".json")
    assert len(str(session.raw_source.name)) <= 100  # the file field's length


def test_the_admin_refuses_a_path_as_encoding_on_the_field() -> None:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "", "pw-root-123"))
    data = form_data(CompactionProfile(name="odd"), encoding=ODD)
    response = client.post("/admin/sessions_app/compactionprofile/add/", data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["encoding"], errors
    assert not CompactionProfile.objects.filter(name="odd").exists()


@pytest.fixture
def odd_default() -> CompactionProfile:
    """The default profile, written around the admin's checks with a path as encoding."""
    CompactionProfile.objects.update(is_default=False)
    return CompactionProfile.objects.create(name="odd", encoding=ODD, is_default=True)


@pytest.mark.usefixtures("odd_default")
def test_creating_a_session_under_it_is_422_naming_the_encoding(api_client: JsonClient) -> None:
    body = {"title": "x", "messages": [{"role": "user", "content": "hi"}]}
    response = api_client.post("/api/sessions", body)
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["path"] == "encoding"
    assert not Session.objects.exists()


@pytest.mark.usefixtures("odd_default")
def test_importing_under_it_is_422_naming_the_encoding(api_client: JsonClient) -> None:
    response = _upload(api_client, "chat.json")
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["path"] == "encoding"
    assert not Session.objects.exists()


@pytest.mark.usefixtures("odd_default")
def test_the_pages_upload_under_it_says_so_without_a_500(user: Any) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    response = _upload(client, "chat.json", url="/import/")
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "encoding" in page
    assert not Session.objects.exists()
