"""Codex's rollout of a run through ctxweb (issue 25; services/importing/proxied.py): the
session that was both proxied and watched (or imported) is one session, not two, matched by
Codex's session id, and holds nothing twice; what the proxy missed is taken from the rollout
once, and a rollout the watcher read before the proxy stored the run is handed over to the
proxied session (tests/sessions_app/proxy/codex_harness.py runs Codex).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from sessions_app.models import Compaction, Message, Session
from sessions_app.services.importing.watching import Watcher
from tests.sessions_app.proxy.codex_harness import (  # noqa: F401 (fixtures)
    COMPACT_AT,
    FINAL,
    PROMPT,
    CodexModel,
    compacting_model_fixture,
    model_fixture,
    run_through_ctxweb,
    the_session,
)
from tests.support.asgi_server import AsgiServer
from tests.support.codex import Provider, require_cli, rollouts, session_id
from tests.support.replay import count, describe, import_once, watch_in_chunks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("how", ["import", "watch"])
def test_a_proxied_run_imported_or_watched_too_stays_one_session(
    how: str,
    proxy_server: AsgiServer,
    model: CodexModel,
    ctx_key: str,
    tmp_path: Path,
    user: Any,
) -> None:
    """Codex's rollout of a proxied run, imported (twice) or watched in pieces cut mid-line
    by the same user, finds the proxied session by Codex's session id and adds nothing: the
    proxy holds every message of it (the developer messages as its overhead)."""
    require_cli()
    done = run_through_ctxweb("custom", proxy_server, ctx_key, tmp_path / "home")
    assert done.returncode == 0, done.stderr
    [rollout] = rollouts(tmp_path / "home")
    proxied = describe(user)
    assert count(proxied) == 1

    if how == "import":
        import_once(rollout, user)
        after = import_once(rollout, user)
    else:
        size = rollout.stat().st_size
        cuts = [size // 4, size // 2 + 3, size - size // 7]
        after = watch_in_chunks(rollout, cuts, tmp_path / "watched", user)

    assert after == proxied
    session = the_session(session_id(done))
    assert session.source_path.endswith(rollout.name)


def test_what_the_proxy_missed_is_taken_from_the_rollout_once(
    proxy_server: AsgiServer, model: CodexModel, ctx_key: str, tmp_path: Path, user: Any
) -> None:
    """The final answer the proxy did not store (a client gone before the stream ended, say)
    is appended from the rollout, once however often it is read."""
    require_cli()
    done = run_through_ctxweb("custom", proxy_server, ctx_key, tmp_path / "home")
    assert done.returncode == 0, done.stderr
    [rollout] = rollouts(tmp_path / "home")
    session = the_session(session_id(done))
    last = Message.objects.filter(session=session).order_by("seq").last()
    assert last is not None
    assert FINAL in json.dumps(last.content)
    last.delete()

    import_once(rollout, user)
    import_once(rollout, user)

    rows = list(Message.objects.filter(session=session).order_by("seq"))
    assert [FINAL in json.dumps(row.content) for row in rows].count(True) == 1
    assert (rows[-1].role, FINAL in json.dumps(rows[-1].content)) == ("assistant", True)
    assert Session.objects.count() == 1


@pytest.mark.parametrize("provider", ["custom", "builtin"])
def test_the_rollout_of_a_run_codex_compacted_adds_nothing_to_its_session(
    provider: Provider,
    proxy_server: AsgiServer,
    compacting_model: CodexModel,
    ctx_key: str,
    tmp_path: Path,
    user: Any,
) -> None:
    """Codex's rollout records its compaction too (a `compacted` line, the built-in
    provider's `compaction` item): imported after the proxied run, it adds no second
    compaction point and no message."""
    require_cli()
    done = run_through_ctxweb(
        provider, proxy_server, ctx_key, tmp_path / "home", compact_at=COMPACT_AT
    )
    assert done.returncode == 0, done.stderr
    [rollout] = rollouts(tmp_path / "home")
    proxied = describe(user)

    assert import_once(rollout, user) == proxied

    session = the_session(session_id(done))
    assert Compaction.objects.filter(session=session).count() == 1


def test_a_rollout_watched_before_the_proxy_stored_the_run_goes_to_the_proxied_session(
    proxy_server: AsgiServer, model: CodexModel, ctx_key: str, tmp_path: Path, user: Any
) -> None:
    """The watcher can read a rollout's first lines while the proxy still waits for the
    first answer (it stores a turn with its answer) and make a session of its own. Once
    the proxied session exists, the next scan hands the file over to it and the watcher's
    session goes: one session, the proxy's, holding nothing twice."""
    require_cli()
    done = run_through_ctxweb("custom", proxy_server, ctx_key, tmp_path / "home")
    assert done.returncode == 0, done.stderr
    [rollout] = rollouts(tmp_path / "home")
    proxied = describe(user)
    session = the_session(session_id(done))
    lines = rollout.read_bytes().splitlines(keepends=True)
    prompt = next(n for n, line in enumerate(lines) if PROMPT.encode() in line)
    copy = tmp_path / "watched" / rollout.name
    copy.parent.mkdir()
    copy.write_bytes(b"".join(lines[: prompt + 1]))
    # as in the race: the proxy has not stored the conversation yet when the watcher scans
    hidden = {"proxy_key": "", "external_id": ""}
    shown = {key: getattr(session, key) for key in hidden}
    Session.objects.filter(pk=session.pk).update(**hidden)
    Watcher(user, [copy.parent]).scan()
    Session.objects.filter(pk=session.pk).update(**shown)
    assert Session.objects.count() == 2

    copy.write_bytes(b"".join(lines))
    Watcher(user, [copy.parent]).scan()  # handed over; read once the file is quiet
    assert Session.objects.count() == 1
    Watcher(user, [copy.parent], clock=lambda: time.time() + 3600).scan()

    assert describe(user) == proxied
    session.refresh_from_db()
    assert session.source_path == str(copy)
