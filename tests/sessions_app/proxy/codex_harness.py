"""The Codex CLI's harness for the proxy tests (issue 25): its model behind ctxweb and a run
of `codex exec` through ctxweb, both ways Codex is pointed at a server (a custom provider:
`base_url`, `env_key`, `wire_api = "responses"`, its own key and ctxweb's in `X-Ctxweb-Key`;
the built-in provider redirected by `openai_base_url` with ctxweb's key as `CODEX_API_KEY`).

The fake upstream (tests/support/fake_responses.py) is the model: it decides each reply from
the request it gets (the next shell call the history does not hold yet, else the final text),
with a reasoning item before each call, so Codex's order of requests cannot put it out of
step. Used by test_codex_runs.py (the runs) and test_codex_transcripts.py (their rollouts).
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessions_app.models import Message, Session
from tests.support.asgi_server import AsgiServer
from tests.support.codex import CTXWEB_KEY_VARIABLE, Provider, run_codex, write_config
from tests.support.fake_responses import (
    LOCAL_SUMMARY,
    FakeResponses,
    ResponsesReply,
    ResponsesRequest,
    is_local_compaction,
    is_remote_compaction,
)

PROMPT = "Write hello.txt with the shell, then read it back."
FINAL = "All done: hello.txt says hello-from-codex."
OWN_KEY = "sk-own-openai-key"
SERVER_KEY = "sk-openai-server-key"
#: The shell calls of a run, in order: (call id, command).
STEPS = (
    ("call_codex_write", "echo hello-from-codex > hello.txt"),
    ("call_codex_read", "cat hello.txt"),
)
#: Codex compacts once a reply's usage passes this (write_config's compact_at).
COMPACT_AT = 5000
Item = dict[str, Any]


class CodexModel(FakeResponses):
    """The fake Responses API as Codex's model: the next step of `STEPS` the request does
    not hold yet, else `FINAL`; after a compaction (its summary or item in the request) the
    final text. `big_step`: the reply to this step reports usage past `COMPACT_AT`."""

    def __init__(self, big_step: int | None = None) -> None:
        super().__init__()
        self.big_step = big_step
        self.responder = self._next

    def _next(self, request: ResponsesRequest) -> ResponsesReply:
        if is_remote_compaction(request.body):
            return ResponsesReply.compaction()
        if is_local_compaction(request.body):
            return ResponsesReply.text(LOCAL_SUMMARY)
        held = json.dumps(request.items)
        if LOCAL_SUMMARY in held or any(i.get("type") == "compaction" for i in request.items):
            return ResponsesReply.text(FINAL)
        for number, (call_id, command) in enumerate(STEPS):
            if f'"{call_id}"' not in held:
                usage = COMPACT_AT + 3000 if number == self.big_step else 1000
                return ResponsesReply.shell(command, call_id).with_usage(usage)
        return ResponsesReply.text(FINAL, reasoning=True).with_usage(1000)

    def turns(self) -> list[ResponsesRequest]:
        """The requests Codex sent as turns (not its compaction requests), in order."""
        return [r for r in self.responses_requests() if r.kind == "turn"]


def upstream_model(settings: Any, big_step: int | None = None) -> Iterator[CodexModel]:
    """Codex's model, configured as ctxweb's OpenAI upstream for the test."""
    with CodexModel(big_step) as server:
        settings.CTXWEB_UPSTREAM_OPENAI_URL = server.base_url.removesuffix("/v1")
        settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = SERVER_KEY
        yield server


@pytest.fixture(name="model")
def model_fixture(settings: Any) -> Iterator[CodexModel]:
    """Codex's model behind ctxweb."""
    yield from upstream_model(settings)


@pytest.fixture(name="compacting_model")
def compacting_model_fixture(settings: Any) -> Iterator[CodexModel]:
    """Codex's model, its reply to the first shell call past the auto-compact limit."""
    yield from upstream_model(settings, big_step=0)


def run_through_ctxweb(
    provider: Provider,
    proxy: AsgiServer,
    ctx_key: str,
    home: Path,
    compact_at: int | None = None,
    headers: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`codex exec PROMPT` through ctxweb: the custom provider with its own key and ctxweb's
    in `X-Ctxweb-Key` (and `headers`), the built-in one with ctxweb's key as its key."""
    base_url = f"{proxy.url}/proxy/openai/v1"
    custom = provider == "custom"
    write_config(
        home, base_url, provider, compact_at=compact_at, ctxweb_header=custom, headers=headers
    )
    key = OWN_KEY if custom else ctx_key
    return run_codex(home, PROMPT, key, timeout=50, environment={CTXWEB_KEY_VARIABLE: ctx_key})


def blocks(session: Session, kind: str, key: str) -> Counter[str]:
    found: Counter[str] = Counter()
    for row in Message.objects.filter(session=session):
        for block in row.content if isinstance(row.content, list) else []:
            if isinstance(block, dict) and block.get("type") == kind:
                found[str(block.get(key))] += 1
    return found


def stored_text(session: Session) -> str:
    rows = Message.objects.filter(session=session).order_by("seq")
    return json.dumps([row.as_dict() for row in rows])


def outline(session: Session) -> tuple[str, list[tuple[str, list[str]]]]:
    """A session's key and each message's role and block types (a failure's message)."""
    rows = Message.objects.filter(session=session).order_by("seq")
    shapes = [(row.role, [str(b.get("type")) for b in row.content]) for row in rows]
    return session.proxy_key, shapes


def the_session(codex_id: str) -> Session:
    sessions = list(Session.objects.all())
    assert len(sessions) == 1, [outline(session) for session in sessions]
    [session] = sessions
    assert session.external_id == codex_id
    return session
