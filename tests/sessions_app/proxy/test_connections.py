"""Where the proxy's synchronous steps run and what becomes of their connections
(sessions_app/proxy/connections.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction

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


def test_under_asgi_a_sqlite_connection_is_kept_from_one_step_to_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite keeps its connection; other databases close or pool theirs")
    closed: list[str] = []
    wrapper = type(connections[DEFAULT_DB_ALIAS])
    real_close = wrapper.close

    def close(self: Any) -> None:
        closed.append(threading.current_thread().name)
        real_close(self)

    monkeypatch.setattr(wrapper, "close", close)
    seen = [_run(_seen, asgi=True) for _ in range(20)]
    assert not [name for name in closed if name.startswith("ctxweb-proxy")]
    by_thread: dict[str, set[int | None]] = {}
    for name, raw, _ in seen:
        by_thread.setdefault(name, set()).add(raw)
    # The executor may start another thread while an idle one is still handing back its
    # turn, but threads are reused, and each keeps the one connection it opened.
    assert len(by_thread) < len(seen)
    assert all(len(raws) == 1 and None not in raws for raws in by_thread.values())


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
