"""API keys: stored hashed, revocable, and repeated failures are throttled per client."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, RequestFactory

from sessions_app.auth import client_id
from sessions_app.models import ApiKey

from .conftest import ApiClient, World


def _every_stored_text() -> str:
    """Every cell of every table, as one text (to look for a secret anywhere in the DB)."""
    cells: list[str] = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            cells.extend(str(cell) for row in cursor.fetchall() for cell in row)
    return "\n".join(cells)


def test_no_plain_key_is_stored_anywhere(world: World) -> None:
    # ctx_<lookup>_<secret>: the secret (token_urlsafe) may itself contain "_".
    secret = world.alice_key.split("_", 2)[2]
    assert len(secret) >= 40
    world.as_alice.get("/api/sessions")  # a use, which touches last_used_at

    stored = _every_stored_text()

    assert secret not in stored
    assert world.alice_key not in stored
    row = ApiKey.objects.get(user=world.alice)
    assert row.key_hash == ApiKey.hash_key(world.alice_key)
    assert len(row.key_hash) == 64


def test_a_key_revoked_in_the_admin_is_refused(world: World) -> None:
    assert world.as_alice.get("/api/sessions").status_code == 200
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-12345-root")
    browser = Client()
    browser.force_login(admin)
    row = ApiKey.objects.get(user=world.alice)

    response = browser.post(
        "/admin/sessions_app/apikey/", {"action": "revoke", "_selected_action": [row.pk]}
    )

    assert response.status_code == 302
    row.refresh_from_db()
    assert row.revoked_at is not None
    refused = world.as_alice.get("/api/sessions")
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"] == "Bearer"
    assert world.as_mallory.get("/api/sessions").status_code == 200, "other keys still work"


def test_a_deactivated_user_s_key_is_refused(world: World) -> None:
    world.alice.is_active = False
    world.alice.save()

    assert world.as_alice.get("/api/sessions").status_code == 401


@pytest.mark.parametrize(
    "header",
    [
        "Bearer ctx_000000000000_wrong",
        "Bearer not-a-key",
        "Basic YWxpY2U6cGFzc3dvcmQ=",
        "Bearer ",
        "ctx_000000000000_wrong",
    ],
)
def test_bad_credentials_are_401(world: World, header: str) -> None:
    client = ApiClient(HTTP_AUTHORIZATION=header)

    assert client.get("/api/sessions").status_code == 401


def test_a_right_lookup_with_a_wrong_secret_is_refused(world: World) -> None:
    prefix = "_".join(world.alice_key.split("_", 2)[:2])  # ctx_<lookup>

    forged = ApiClient(f"{prefix}_{'A' * 43}")

    assert forged.get("/api/sessions").status_code == 401


def test_repeated_failures_are_throttled_but_a_good_key_never_waits(
    world: World, settings: Any
) -> None:
    settings.CTXWEB_AUTH_FAILURE_LIMIT = 5
    attacker = ApiClient("ctx_000000000000_guess", REMOTE_ADDR="203.0.113.7")

    statuses = [attacker.get("/api/sessions").status_code for _ in range(7)]

    assert statuses[:5] == [401] * 5
    assert statuses[5:] == [429, 429]
    same_address = ApiClient(world.alice_key, REMOTE_ADDR="203.0.113.7")
    assert same_address.get("/api/sessions").status_code == 200
    elsewhere = ApiClient(world.alice_key, REMOTE_ADDR="198.51.100.9")
    assert elsewhere.get("/api/sessions").status_code == 200


def test_fifty_failures_then_a_valid_key_from_the_same_address_passes(world: World) -> None:
    # The default limit (20): a brute-force run from one address must not lock out the
    # owner of a valid key at that address (a shared NAT, an office, the same CI host).
    address = {"REMOTE_ADDR": "203.0.113.7"}
    guesses = [
        ApiClient(f"ctx_{n:012x}_guess", **address).get("/api/sessions").status_code
        for n in range(50)
    ]

    assert set(guesses) == {401, 429}
    response = ApiClient(world.alice_key, **address).get("/api/sessions")
    assert response.status_code == 200


def test_failures_are_counted_per_key_prefix_across_addresses(world: World, settings: Any) -> None:
    settings.CTXWEB_AUTH_FAILURE_LIMIT = 3
    prefix = "_".join(world.alice_key.split("_", 2)[:2])  # ctx_<lookup>, public
    statuses = [
        ApiClient(f"{prefix}_{'A' * 43}", REMOTE_ADDR=f"203.0.113.{n}")
        .get("/api/sessions")
        .status_code
        for n in range(5)
    ]

    assert statuses == [401, 401, 401, 429, 429]
    throttled = ApiClient(f"{prefix}_{'B' * 43}", REMOTE_ADDR="198.51.100.1").get("/api/sessions")
    assert throttled.status_code == 429
    assert throttled.json() == {
        "detail": "too many failed authentication attempts; try again later"
    }
    assert int(throttled["Retry-After"]) > 0
    assert world.as_alice.get("/api/sessions").status_code == 200, "the real key still works"


def test_successful_requests_are_never_throttled(world: World, settings: Any) -> None:
    settings.CTXWEB_AUTH_FAILURE_LIMIT = 3

    statuses = {world.as_alice.get("/api/sessions").status_code for _ in range(10)}

    assert statuses == {200}


def test_behind_a_proxy_failures_are_charged_to_the_real_client(
    world: World, settings: Any
) -> None:
    # nginx (CTXWEB_TRUSTED_PROXIES=1) appends the client's address to X-Forwarded-For;
    # every request reaches Django from the proxy's own address.
    settings.CTXWEB_AUTH_FAILURE_LIMIT = 3
    settings.CTXWEB_TRUSTED_PROXIES = 1
    proxy = {"REMOTE_ADDR": "127.0.0.1"}
    attacker = ApiClient("ctx_000000000000_guess", HTTP_X_FORWARDED_FOR="203.0.113.7", **proxy)
    honest = ApiClient(world.alice_key, HTTP_X_FORWARDED_FOR="198.51.100.9", **proxy)
    spoofer = ApiClient(
        "ctx_000000000000_guess", HTTP_X_FORWARDED_FOR="198.51.100.9, 203.0.113.7", **proxy
    )

    statuses = [attacker.get("/api/sessions").status_code for _ in range(4)]
    spoofed = spoofer.get("/api/sessions").status_code

    assert statuses == [401, 401, 401, 429]
    assert spoofed == 429, "a forged left part of X-Forwarded-For does not escape the limit"
    assert honest.get("/api/sessions").status_code == 200, "other clients are not locked out"


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        pytest.param(0, "203.0.113.7", "10.0.0.2", id="no-proxy-ignores-the-header"),
        pytest.param(1, "203.0.113.7", "203.0.113.7", id="one-proxy"),
        pytest.param(1, "198.51.100.9, 203.0.113.7", "203.0.113.7", id="one-proxy-forged-left"),
        pytest.param(2, "198.51.100.9, 203.0.113.7, 10.0.0.1", "203.0.113.7", id="two-proxies"),
        pytest.param(2, "203.0.113.7", "10.0.0.2", id="fewer-entries-than-proxies"),
        pytest.param(1, " , ", "10.0.0.2", id="empty-entries"),
        pytest.param(1, None, "10.0.0.2", id="no-header"),
    ],
)
def test_client_id_trusts_only_the_configured_proxies(
    settings: Any, proxies: int, forwarded: str | None, expected: str
) -> None:
    settings.CTXWEB_TRUSTED_PROXIES = proxies
    meta: dict[str, Any] = {"REMOTE_ADDR": "10.0.0.2"}
    if forwarded is not None:
        meta["HTTP_X_FORWARDED_FOR"] = forwarded

    assert client_id(RequestFactory().get("/", **meta)) == expected
