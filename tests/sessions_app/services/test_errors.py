"""sessions_app.services.errors: the engine's errors as the service error tree."""

from __future__ import annotations

import pytest

from compaction import (
    ArchiveError,
    BlobStoreError,
    CompactionError,
    InvalidMessagesError,
    PolicyError,
    Problem,
    SummaryError,
    UnknownEncodingError,
)
from sessions_app.services.errors import (
    InvalidInput,
    InvariantError,
    ServiceError,
    Unavailable,
    engine_error,
)
from sessions_app.services.errors import (
    Problem as FieldProblem,
)


def test_invalid_messages_keep_every_path() -> None:
    error = engine_error(
        InvalidMessagesError([Problem("messages[1].role", "bad"), Problem("messages[3]", "x")])
    )
    assert isinstance(error, InvalidInput)
    assert error.problems == (
        FieldProblem("messages[1].role", "bad"),
        FieldProblem("messages[3]", "x"),
    )


def test_a_policy_error_names_its_field() -> None:
    error = engine_error(PolicyError("threshold_ratio", "must be between 0 and 1"))
    assert isinstance(error, InvalidInput)
    assert error.first == FieldProblem("threshold_ratio", "must be between 0 and 1")


@pytest.mark.parametrize(
    ("engine", "retry_after"),
    [
        (SummaryError("api_error", "overloaded", retry_after=12.2), 13),
        (SummaryError("timeout"), 5),
        (BlobStoreError("disk full"), 5),
        (ArchiveError("no archive"), 5),
    ],
)
def test_a_failing_model_or_storage_is_unavailable(
    engine: CompactionError, retry_after: int
) -> None:
    error = engine_error(engine)
    assert isinstance(error, Unavailable)
    assert error.retry_after == retry_after


def test_any_other_engine_error_is_about_the_input_as_a_whole() -> None:
    error = engine_error(UnknownEncodingError("unknown encoding 'x'"))
    assert isinstance(error, InvalidInput)
    assert error.first.path == "body"


def test_a_broken_invariant_is_no_service_error_and_no_value_error() -> None:
    assert not issubclass(InvariantError, ServiceError | ValueError)
    assert issubclass(InvariantError, RuntimeError)
