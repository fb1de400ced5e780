"""`compact_json` (json's C encoder built once) gives what `json.dumps` gives."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.tokens import compact_json

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@given(_VALUES)
def test_compact_json_is_json_dumps_without_spaces(value: Any) -> None:
    assert compact_json(value) == _dumps(value)


def test_non_string_keys_and_unserializable_values_go_as_json_dumps_takes_them() -> None:
    assert compact_json({1: [1.5, None], None: "é", 2.5: float("nan")}) == _dumps(
        {1: [1.5, None], None: "é", 2.5: float("nan")}
    )
    with pytest.raises(TypeError):
        compact_json({"a": {1, 2}})


def test_a_cycle_is_refused_as_json_refuses_it() -> None:
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    with pytest.raises(ValueError, match="Circular reference"):
        compact_json(value)
    assert compact_json({"a": [value["a"]]}) == '{"a":[1]}'  # the encoder holds no state
