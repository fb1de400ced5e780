"""A Codex rollout of a session the proxy recorded: one session, nothing twice (issue 25;
services/importing/proxied.py). The proxied session is built as the Responses route stores
a Codex run (the developer messages as overhead, a wire turn as one message, reasoning as a
thinking block); the CLI itself runs in tests/sessions_app/proxy/test_codex_runs.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from sessions_app.models import Message, Session
from sessions_app.services.importing import import_file
from sessions_app.services.importing.watching import Watcher
from sessions_app.services.sessions.lifecycle import create_session

pytestmark = pytest.mark.django_db

CODEX_ID = "01a22290-0000-7000-8000-000000000001"
ENVIRONMENT = "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"
PROMPT = "Say hello with the shell."
ENCRYPTED = "gAAAAB-opaque"


def _line(kind: str, payload: dict[str, Any]) -> str:
    return json.dumps({"timestamp": "2026-11-28T14:00:00.000Z", "type": kind, "payload": payload})


def _item(**fields: Any) -> str:
    return _line("response_item", fields)


def _said(role: str, text: str, kind: str = "input_text") -> str:
    return _item(type="message", role=role, content=[{"type": kind, "text": text}])


def _rollout(*more: str) -> list[str]:
    """A Codex run: the developer prompt, the environment, the prompt, a reasoning item and
    a shell call, its output, the answer."""
    return [
        _line("session_meta", {"id": CODEX_ID, "cwd": "/repo", "cli_version": "0.171.0"}),
        _said("developer", "You are a coding agent running in the Codex CLI."),
        _said("user", ENVIRONMENT),
        _said("user", PROMPT),
        _item(
            type="reasoning",
            id="rs_1",
            summary=[{"type": "summary_text", "text": "Plan: run echo."}],
            encrypted_content=ENCRYPTED,
        ),
        _item(
            type="function_call",
            id="fc_1",
            name="exec_command",
            call_id="call_1",
            arguments=json.dumps({"cmd": "echo hello"}),
        ),
        _item(type="function_call_output", call_id="call_1", output="hello\n"),
        _said("assistant", "It printed hello.", "output_text"),
        *more,
    ]


def _proxied(user: Any) -> Session:
    """The session the proxy stored of `_rollout()`'s run."""
    thinking = {"type": "thinking", "thinking": "Plan: run echo.", "signature": ENCRYPTED}
    call = {
        "type": "tool_use",
        "id": "call_1",
        "name": "exec_command",
        "input": {"cmd": "echo hello"},
    }
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": ENVIRONMENT}, {"type": "text", "text": PROMPT}],
        },
        {"role": "assistant", "content": [thinking, call]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "hello\n"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "It printed hello."}]},
    ]
    session = create_session(user, messages=messages, source_format="codex", external_id=CODEX_ID)
    Session.objects.filter(pk=session.pk).update(proxy_key=f"responses:{CODEX_ID}")
    return session


def _write(folder: Path, lines: list[str]) -> Path:
    path = folder / f"rollout-2026-11-28T14-00-00-{CODEX_ID}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _rows(session: Session) -> list[dict[str, Any]]:
    return [row.as_dict() for row in Message.objects.filter(session=session).order_by("seq")]


def test_the_rollout_of_a_proxied_run_adds_nothing_to_its_session(
    user: Any, tmp_path: Path
) -> None:
    session = _proxied(user)
    before = _rows(session)
    path = _write(tmp_path, _rollout())

    first = import_file(user, path)
    again = import_file(user, path)

    assert (first.session.pk, first.created, first.new_messages) == (session.pk, False, 0)
    assert (again.session.pk, again.new_messages) == (session.pk, 0)
    assert Session.objects.count() == 1
    assert _rows(session) == before
    session.refresh_from_db()
    assert session.source_path == str(path.resolve())


def test_what_the_proxy_does_not_hold_is_appended_once(user: Any, tmp_path: Path) -> None:
    """A turn the proxy never saw (here: the same words asked again, and their answer) is
    appended after the proxy's messages; a stored text stands for one text of the rollout,
    so a prompt repeated is not taken for the one already held."""
    session = _proxied(user)
    path = _write(
        tmp_path, _rollout(_said("user", PROMPT), _said("assistant", "Done.", "output_text"))
    )

    import_file(user, path)
    import_file(user, path)

    rows = _rows(session)
    assert [row["role"] for row in rows] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert rows[4]["content"] == [{"type": "text", "text": PROMPT}]
    assert rows[5]["content"] == [{"type": "text", "text": "Done."}]
    assert Session.objects.count() == 1


def test_a_session_the_proxy_did_not_record_merges_as_before(user: Any, tmp_path: Path) -> None:
    """Without a proxy key the rollout is an ordinary re-read: its system prompt and one
    message per item, nothing dropped."""
    path = _write(tmp_path, _rollout())
    imported = import_file(user, path)

    again = import_file(user, _write(tmp_path, _rollout(_said("user", PROMPT))))

    assert (again.session.pk, again.created, again.new_messages) == (imported.session.pk, False, 1)
    roles = [row["role"] for row in _rows(imported.session)]
    assert roles[0] == "system"
    assert roles.count("user") == 4


def test_the_watcher_reads_a_proxied_sessions_rollout_once_it_is_quiet(
    user: Any, tmp_path: Path
) -> None:
    """While the rollout is written the proxy records the conversation live: a turn it has
    not stored yet (its answer still streaming) must not be taken from the rollout first, or
    the proxy's next request would no longer continue the session. So the watcher reads a
    proxied session's rollout (found by the Codex session id of its first line) only once
    the file has been quiet for the settle period, and then only what the proxy lacks."""
    session = _proxied(user)
    _write(tmp_path, _rollout(_said("user", "And now?")))

    Watcher(user, [tmp_path]).scan()
    assert len(_rows(session)) == 4

    later = Watcher(user, [tmp_path], clock=lambda: time.time() + 3600)
    later.scan()
    later.scan()

    rows = _rows(session)
    assert [row["role"] for row in rows[3:]] == ["assistant", "user"]
    assert rows[-1]["content"] == [{"type": "text", "text": "And now?"}]
    assert Session.objects.count() == 1
