"""Where the proxy's synchronous steps run and what becomes of their connections
(sessions_app/proxy/connections.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from sessions_app.proxy.connections import step

pytestmark = pytest.mark.django_db(transaction=True)


def _seen() -> tuple[str, int | None, int]:
    """This thread's name, its raw database connection and a query's answer through it."""
    answer = get_user_model().objects.count()
    return threading.current_thread().name, id(connection.connection), answer


def _run(function: Any, *, asgi: bool) -> Any:
    return async_to_sync(step(function, asgi=asgi))()


def test_under_asgi_steps_run_on_the_proxys_threads_and_see_committed_rows() -> None:
    get_user_model().objects.create_user("someone")
    name, _, users = _run(_seen, asgi=True)
    assert name.startswith("ctxweb-proxy")
    assert users == 1


def test_under_asgi_a_sqlite_connection_is_kept_from_one_step_to_the_next() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite keeps its connection; other databases close or pool theirs")
    first = _run(_seen, asgi=True)
    second = _run(_seen, asgi=True)
    assert first[0] == second[0]  # one idle thread serves both
    assert first[1] == second[1] is not None


def test_under_asgi_other_databases_close_their_connection_after_each_step() -> None:
    if connection.vendor == "sqlite":
        pytest.skip("covered by the SQLite test above")

    def opened_then_left() -> bool:
        get_user_model().objects.exists()
        return connection.connection is not None

    assert _run(opened_then_left, asgi=True)
    assert _run(lambda: connection.connection is None, asgi=True)


def test_a_step_that_fails_inside_a_transaction_leaves_its_thread_usable() -> None:
    def failing() -> None:
        with transaction.atomic():
            get_user_model().objects.create_user("rolled-back")
            raise RuntimeError("the step failed")

    with pytest.raises(RuntimeError):
        _run(failing, asgi=True)
    assert (
        _run(lambda: get_user_model().objects.filter(username="rolled-back").count(), asgi=True)
        == 0
    )
    assert _run(lambda: connection.in_atomic_block, asgi=True) is False


def test_elsewhere_a_step_runs_where_django_runs_the_requests_synchronous_code() -> None:
    name, _, _ = _run(_seen, asgi=False)
    assert not name.startswith("ctxweb-proxy")
