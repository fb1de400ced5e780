"""The one cursor codec."""

from __future__ import annotations

import base64
import json

import pytest

from sessions_app.selectors.cursors import (
    InvalidCursor,
    cursor_value,
    decode_cursor,
    encode_cursor,
)
from sessions_app.services.errors import InvalidInput


def _raw(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def test_round_trip_and_first_page() -> None:
    cursor = encode_cursor({"seq": 41, "id": "x"})
    assert "=" not in cursor
    assert decode_cursor(cursor) == {"seq": 41, "id": "x"}
    assert decode_cursor(None) is None
    assert decode_cursor("") is None


@pytest.mark.parametrize(
    "cursor", ["%%%garbage", "garbage!!", _raw([1, 2]), _raw("text"), _raw({"k": "a\x00b"})]
)
def test_a_cursor_not_issued_here_is_invalid_input_on_the_field_cursor(cursor: str) -> None:
    with pytest.raises(InvalidCursor) as caught:
        decode_cursor(cursor)
    assert isinstance(caught.value, InvalidInput)
    assert caught.value.first.path == "cursor"


def test_cursor_value_checks_the_type() -> None:
    assert cursor_value({"n": 3}, "n", int) == 3
    for position in ({}, {"n": "3"}, {"n": True}):
        with pytest.raises(InvalidCursor):
            cursor_value(position, "n", int)
