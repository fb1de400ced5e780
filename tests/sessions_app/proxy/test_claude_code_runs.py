"""Longer Claude Code runs through the proxy, with each installed CLI version (issue 23):
Write a file, run it (Bash), Read it, a Bash command that fails, an Edit and a subagent,
with ctxweb's key in `ANTHROPIC_CUSTOM_HEADERS`. The fake upstream decides each reply from
the request it gets (the next step of the main run or of the subagent that the request's
history does not hold yet), so the order in which Claude Code sends its requests cannot
put it out of step. One run is one session (its subagent one more, under it), every tool
call is stored once, and the stored conversation is the one the client last sent plus the
final answer.

What Claude Code (2.1.328 and 2.1.332 alike) changes in a message it sends again, none of
it an edit: a mid-conversation system message is a one-block list with `cache_control`
while it is the last message, a string later; the one cache breakpoint in `messages` is on
the last block of the last message, so it leaves a `tool_result` for a later one; and a
tool call of the model comes back with the tool's schema defaults filled in (Edit's
`"replace_all": false`, first): the stored answer and the client's copy of it differ, which
split a run into "<title>" and "<title> (continued)" before the canonical form.

`CTXWEB_SAVE_WIRE=1` also writes each version's request bodies, as the upstream received
them, to tests/fixtures/wire/claude-code-<version>/ (see the README there).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessions_app.models import Message, Session
from tests.support.asgi_server import AsgiServer
from tests.support.claude_code import VERSIONS, require_cli, run_claude
from tests.support.fake_anthropic import Reply
from tests.support.fake_server import RecordedRequest
from tests.support.fake_streaming import StreamingAnthropic
from tests.support.replay import Stored, import_once, watch_in_chunks

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "Write hello.py, run it, read it, try a missing file, fix the greeting, check it."
SUBAGENT_PROMPT = "SUBAGENT: read hello.py and say what it prints."
FINAL = "All done."
SUB_FINAL = "It prints hello, world."
# A background subagent (2.1.x's default) ends the main run's turn before its answer is in;
# the model then waits for the notification.
WAITING = "Waiting for the check."
WIRE = Path(__file__).resolve().parents[2] / "fixtures" / "wire"
Body = dict[str, Any]


def _call(tool_id: str, name: str, **tool_input: Any) -> Body:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def _main_steps(work: Path, agent: str) -> list[list[Body]]:
    """Each reply of the main run but the last; a model's way: thinking and a word first."""
    script = str(work / "hello.py")
    thinking = {"type": "thinking", "thinking": "Plan: write, run.", "signature": "sig-01"}
    edit = {"old_string": "'hello'", "new_string": "'hello, world'"}
    return [
        [
            thinking,
            {"type": "text", "text": "I'll write the script."},
            _call("toolu_01write", "Write", file_path=script, content="print('hello')\n"),
        ],
        [_call("toolu_02run", "Bash", command="python3 hello.py", description="Run it")],
        [_call("toolu_03read", "Read", file_path=script)],
        [_call("toolu_04fail", "Bash", command="cat missing.txt", description="A missing file")],
        [_call("toolu_05edit", "Edit", file_path=script, **edit)],
        [
            _call(
                "toolu_06agent",
                agent,
                description="Check the script",
                prompt=SUBAGENT_PROMPT,
                subagent_type="general-purpose",
                # in the foreground: a background agent's requests would overlap the main
                # run's, and the in-memory SQLite of the tests then fails some with "database
                # table is locked" (stored nothing, forwarded: fail open)
                run_in_background=False,
            )
        ],
    ]


def _sub_steps(work: Path) -> list[list[Body]]:
    return [[_call("toolu_11subread", "Read", file_path=str(work / "hello.py"))]]


def _tool_ids(work: Path) -> list[str]:
    steps = [*_main_steps(work, "Agent"), *_sub_steps(work)]
    return [block["id"] for step in steps for block in step if block["type"] == "tool_use"]


def _is_subagent(body: Body) -> bool:
    return SUBAGENT_PROMPT in json.dumps(body["messages"][:1])


def _answer(body: Body, work: Path) -> Reply:
    """The next step the request's history does not hold, else the final text (the main
    run's once the subagent's answer is in it); a side request (no tools) gets a short
    text."""
    names = {tool.get("name") for tool in body.get("tools") or []}
    if not names:
        return Reply.text("Side answer.")
    held = json.dumps(body["messages"])
    if _is_subagent(body):
        steps, final = _sub_steps(work), SUB_FINAL
    else:
        steps, final = _main_steps(work, "Agent" if "Agent" in names else "Task"), FINAL
        final = final if SUB_FINAL in held else WAITING
    for step in steps:
        if f'"{step[-1]["id"]}"' not in held:
            return Reply.blocks(step, stop_reason="tool_use")
    return Reply.text(final)


class AgentUpstream(StreamingAnthropic):
    """The fake Messages API as the agent's model (`_answer`), recording every request."""

    def __init__(self, work: Path) -> None:
        super().__init__()
        self.work = work

    def _take(self, request: RecordedRequest) -> Any:
        with self._lock:
            self.requests.append(request)
        return _answer(request.body, self.work)

    def messages_requests(self) -> list[RecordedRequest]:
        """The Messages API requests (not count_tokens), in order."""
        return [r for r in self.requests if r.path.split("?")[0] == "/v1/messages"]


@pytest.fixture
def agent_upstream(settings: Any, tmp_path: Path) -> Iterator[AgentUpstream]:
    """The scripted agent model the proxy forwards to, with the server's key configured."""
    with AgentUpstream(tmp_path / "project") as server:
        settings.CTXWEB_UPSTREAM_ANTHROPIC_URL = server.base_url
        settings.CTXWEB_UPSTREAM_ANTHROPIC_API_KEY = "sk-ant-server-key"
        yield server


def _run(
    version: str, proxy: AsgiServer, ctx_key: str, home: Path
) -> subprocess.CompletedProcess[str]:
    (home / "tmp").mkdir()
    return run_claude(
        f"{proxy.url}/proxy/anthropic",
        "sk-ant-own-key",
        home,
        PROMPT,
        "--allowedTools",
        "Write,Bash,Read,Edit,Agent,Task",
        version=version,
        timeout=50,
        ANTHROPIC_CUSTOM_HEADERS=f"X-Ctxweb-Key: {ctx_key}",
        TMPDIR=str(home / "tmp"),  # where it keeps a background agent's output
    )


def _save_wire(version: str, requests: list[RecordedRequest]) -> None:
    folder = WIRE / f"claude-code-{version}"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.json"):
        old.unlink()
    for n, request in enumerate(requests):
        text = json.dumps(request.body, ensure_ascii=False)
        (folder / f"{n:02d}.json").write_text(text + "\n", encoding="utf-8")


def _defaults(body: Body) -> dict[str, dict[str, Any]]:
    """Each tool's input defaults, from the request's tool schemas."""
    found: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        properties = (tool.get("input_schema") or {}).get("properties") or {}
        found[tool["name"]] = {
            key: spec["default"] for key, spec in properties.items() if "default" in spec
        }
    return found


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _strip(item) for key, item in value.items() if key != "cache_control"}
    return [_strip(item) for item in value] if isinstance(value, list) else value


def _comparable(message: Body, defaults: dict[str, dict[str, Any]]) -> Body:
    """Role and content as the same conversation means it (issue 23, the canonical form):
    no `cache_control` (Claude Code moves its breakpoint every turn), a string as one text
    block, a tool call's input without the defaults Claude Code fills in when it sends the
    call back (Edit's `replace_all: false`)."""
    content = message["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    blocks = [_without_defaults(block, defaults) for block in blocks]
    comparable: Body = _strip({"role": message["role"], "content": blocks})
    return comparable


def _without_defaults(block: Any, defaults: dict[str, dict[str, Any]]) -> Any:
    if not (isinstance(block, dict) and block.get("type") == "tool_use"):
        return block
    default = defaults.get(block["name"], {})
    given = {k: v for k, v in block["input"].items() if k not in default or default[k] != v}
    return {**block, "input": given}


def _stored(session: Session, defaults: dict[str, dict[str, Any]]) -> list[Body]:
    rows = Message.objects.filter(session=session).order_by("seq")
    return [_comparable(row.as_dict(), defaults) for row in rows]


def _last_sent(requests: list[RecordedRequest], subagent: bool) -> tuple[list[Body], Body]:
    """The messages of the last request of the main run (or of the subagent), and that
    request."""
    mine = [r.body for r in requests if r.body.get("tools") and _is_subagent(r.body) == subagent]
    return mine[-1]["messages"], mine[-1]


def _conversation(requests: list[RecordedRequest], final: str, subagent: bool) -> list[Body]:
    """What the client last sent, and the final answer, comparable with stored messages."""
    messages, body = _last_sent(requests, subagent)
    answer = {"role": "assistant", "content": [{"type": "text", "text": final}]}
    return [_comparable(m, _defaults(body)) for m in [*messages, answer]]


def _blocks(session_ids: list[Any], kind: str, key: str) -> Counter[str]:
    found: Counter[str] = Counter()
    for row in Message.objects.filter(session__in=session_ids):
        for block in row.content if isinstance(row.content, list) else []:
            if isinstance(block, dict) and block.get("type") == kind:
                found[str(block.get(key))] += 1
    return found


@pytest.mark.parametrize("version", VERSIONS)
def test_a_claude_code_run_is_one_session_with_each_tool_call_once(
    version: str,
    proxy_server: AsgiServer,
    agent_upstream: AgentUpstream,
    ctx_key: str,
    tmp_path: Path,
) -> None:
    require_cli(version)

    done = _run(version, proxy_server, ctx_key, tmp_path)

    assert (done.returncode, done.stdout.strip()[-len(FINAL) :]) == (0, FINAL), done.stderr
    assert (tmp_path / "project" / "hello.py").read_text() == "print('hello, world')\n"
    requests = agent_upstream.messages_requests()
    if os.environ.get("CTXWEB_SAVE_WIRE"):
        _save_wire(version, requests)
    assert {r.api_key for r in requests} == {"sk-ant-own-key"}  # the client's, never ctxweb's
    sessions = {s.pk: s for s in Session.objects.all()}
    titles = sorted(s.title for s in sessions.values())
    assert not [t for t in titles if t.endswith("(continued)")], titles
    [top] = [s for s in sessions.values() if s.parent_id is None]
    [sub] = [s for s in sessions.values() if s.parent_id is not None]
    assert sub.parent_id == top.pk
    ids = _tool_ids(tmp_path / "project")
    assert _blocks(list(sessions), "tool_use", "id") == Counter(ids)
    assert _blocks(list(sessions), "tool_result", "tool_use_id") == Counter(ids)
    defaults = _defaults(requests[0].body)
    assert _stored(top, defaults) == _conversation(requests, FINAL, subagent=False)
    assert _stored(sub, defaults) == _conversation(requests, SUB_FINAL, subagent=True)
    _assert_its_transcript_agrees(tmp_path, top)


def _assert_its_transcript_agrees(home: Path, proxied: Session) -> None:
    """The transcript the CLI wrote of the same run: imported in one go and watched in
    pieces (cut mid-line) it stores the same sessions; both hold the proxied run's shape
    (one session, its subagent under the same Agent call, the same tool calls in the same
    order). The messages themselves are not compared with the proxy's: the transcript
    records what the CLI keeps (its reminders, its own tool-result texts), the proxy what
    went over the wire."""
    [transcript] = (home / ".claude" / "projects").glob("*/*.jsonl")
    size = transcript.stat().st_size
    once = import_once(transcript)
    cuts = [size // 5, size // 2 + 7, size - size // 9]
    assert watch_in_chunks(transcript, cuts, home / "watched") == once
    [top] = once
    calls, subagents = _shape(top)
    assert len(calls) >= 6, calls
    assert len(subagents) == 1, subagents
    assert (calls, subagents) == _shape_of(proxied)


def _shape(node: Stored) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """A stored session's tool call ids in order, and each subagent's (call, ids)."""
    ids = [i for _, content in node.messages for i in _ids_in(json.loads(content))]
    return ids, [(child.parent_tool_use_id, _shape(child)[0]) for child in node.children]


def _ids_in(message: Any) -> list[str]:
    blocks = message.get("content") or []
    return [b["id"] for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]


def _shape_of(session: Session) -> tuple[list[str], list[tuple[str, list[str]]]]:
    rows = Message.objects.filter(session=session).order_by("seq")
    ids = [i for row in rows for i in _ids_in({"content": row.content})]
    children = Session.objects.filter(parent=session)
    return ids, [(child.parent_tool_use_id, _shape_of(child)[0]) for child in children]
