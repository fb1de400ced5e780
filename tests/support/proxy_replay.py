"""A stored conversation replayed through the proxy, request by request, as its client sent it.

    replay(import_once(path), target, "anthropic", Variations(retried=2))
    describe(target_owner)          # tests/support/replay.py: compare with the import

Each session of a `Sessions` forest (tests/support/replay.py) becomes the requests a client
would have sent: before each assistant message, one request holding the history so far,
which the fake upstream answers with that assistant message; a history ending in other
messages gets one last request, answered with `END` (see `without_end`). Claude Code
transcripts go as Anthropic Messages requests carrying Claude Code's session id in
`metadata.user_id`; a subagent is its own request stream under the same id, with its own
system prompt (Claude Code's subagent mark in it) and tools, sent right after the answer
holding the call that starts it (the proxy links it as it does a live Claude Code,
services/proxying/origin.py). Other transcripts go as OpenAI Chat requests, each stored
message converted alone by the app's exporter (exporters/openai.py).

What the proxy cannot be told, hence not compared (`comparable`): a leading system message
(a request's system prompt, never stored as a message), the answer to a history that does
not end with one (`END`), and for OpenAI Chat the thinking blocks (Chat Completions has no
reasoning in its answers; `reasoning_content` is an extension the proxy does not read),
several text blocks of one answer (an answer's content is one string) and a tool result's
`is_error` (and the importer's `ctxweb_synthetic` mark): a `role: "tool"` message has no
such field.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

import httpx

from sessions_app.exporters.openai import to_openai
from tests.support.fake_anthropic import FakeAnthropic, Reply
from tests.support.fake_openai import ChatReply
from tests.support.replay import Sessions, Stored, canonical_content

__all__ = ["END", "ProxyTarget", "Variations", "comparable", "replay"]

#: The answer to a last request whose history ends with no assistant message.
END: Final = "(end of the replayed transcript)"
_SYSTEM: Final = "You are Claude Code, replaying a transcript."
_SUBAGENT_SYSTEM: Final = "x-anthropic-billing-header: cc_version=2.1.332; cc_is_subagent=true;"
_TOOLS: Final[list[dict[str, Any]]] = [
    {"name": name, "description": f"The {name} tool.", "input_schema": {"type": "object"}}
    for name in ("Agent", "Task", "Bash", "Read", "Edit")
]
Provider = Literal["anthropic", "openai"]
#: A tool result's flags a `role: "tool"` message cannot carry (the importer's mark of a
#: result it made up for a call that had none, and the error flag).
_RESULT_FLAGS: Final = frozenset({"is_error", "ctxweb_synthetic"})


@dataclass(frozen=True)
class Variations:
    """What a client changes between requests without changing the conversation. Each
    applies to every other request (odd ones), so consecutive requests differ."""

    #: String content sent as one text block.
    blocks: bool = False
    #: A `cache_control` breakpoint on the newest message and one earlier, moved every time.
    cache_moves: bool = False
    #: Every object's keys in reverse order.
    reversed_keys: bool = False
    #: The system prompt as a list of one text block (Anthropic).
    system_list: bool = False
    #: Null and false fields added to the answers sent back, as SDKs and Claude Code do
    #: (`citations: null` on a text block, a tool's default `replace_all: false` filled into
    #: the input of the calls it sends back).
    defaults: bool = False
    #: The request (by number, over the whole replay) sent twice.
    retried: int | None = None


@dataclass
class ProxyTarget:
    """Where to send: the proxy's base URL, a ctxweb key, and the fake upstreams."""

    url: str
    key: str
    anthropic: FakeAnthropic
    openai: FakeAnthropic
    sent: int = field(default=0)


def replay(sessions: Sessions, target: ProxyTarget, provider: Provider, how: Variations) -> None:
    """Send every session of `sessions` (subagents among their parent's requests)."""
    run = _Run(target, provider, how, f"session_{uuid.uuid4()}")
    with httpx.Client(timeout=60) as run.http:
        for root in sessions:
            run.stream(root, _SYSTEM)


def comparable(sessions: Sessions, provider: Provider) -> Sessions:
    """`sessions` without what the proxy cannot be told by `provider`'s clients (module
    docstring): leading system messages, a last answer `END`, and (OpenAI) thinking, with
    an answer's text blocks joined."""
    return tuple(sorted(_comparable(node, provider) for node in sessions))


def _comparable(node: Stored, provider: Provider) -> Stored:
    messages = [(role, _content(form)) for role, form in node.messages]
    while messages and messages[0][0] == "system":
        messages.pop(0)
    if messages and node.messages[-1] == ("assistant", canonical_content(END)):
        messages.pop()
    if provider == "openai":
        messages = [(role, _chat_expressible(role, content)) for role, content in messages]
    children = tuple(sorted(_comparable(child, provider) for child in node.children))
    kept = tuple((role, canonical_content(content)) for role, content in messages)
    return replace(node, messages=kept, children=children)


def _chat_expressible(role: str, content: Any) -> Any:
    """`content` as Chat Completions can carry it: no thinking, no flags on a tool result,
    and an answer's texts as one."""
    if not isinstance(content, list):
        return content
    blocks = [
        {k: v for k, v in b.items() if k not in _RESULT_FLAGS}
        if b.get("type") == "tool_result"
        else b
        for b in content
        if isinstance(b, dict) and b.get("type") != "thinking"
    ]
    if role != "assistant":
        return blocks
    texts = [b for b in blocks if b.get("type") == "text"]
    joined = [{"type": "text", "text": "\n\n".join(str(b.get("text", "")) for b in texts)}]
    return [*(joined if texts else []), *(b for b in blocks if b.get("type") != "text")]


class _Run:
    """One replay: the requests so far and the client's session id."""

    http: httpx.Client

    def __init__(self, target: ProxyTarget, provider: Provider, how: Variations, sid: str):
        self.target, self.provider, self.how = target, provider, how
        self.metadata = {"user_id": f"user_replay_account__{sid}"}

    def stream(self, node: Stored, system: str) -> None:
        """The requests of one session, its subagents after the answer calling them."""
        messages = [{"role": r, "content": _content(form)} for r, form in node.messages]
        waiting = list(node.children)
        for index, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            self.send(messages[:index], message, system)
            for child in [c for c in waiting if c.parent_tool_use_id in _call_ids(message)]:
                waiting.remove(child)
                self.stream(child, _SUBAGENT_SYSTEM)
        if not messages or messages[-1]["role"] != "assistant":
            self.send(messages, {"role": "assistant", "content": END}, system)
        for child in waiting:  # no call of this session starts them
            self.stream(child, _SUBAGENT_SYSTEM)

    def send(self, history: list[dict[str, Any]], answer: dict[str, Any], system: str) -> None:
        """One request (twice when it is the retried one), answered with `answer`."""
        number = self.target.sent
        self.target.sent += 1
        times = 2 if self.how.retried == number else 1
        odd = number % 2 == 1
        if self.provider == "anthropic":
            self.target.anthropic.script(*[Reply.blocks(_blocks(answer["content"]))] * times)
            url, body = "/proxy/anthropic/v1/messages", self._anthropic(history, system, odd)
            headers = {"x-api-key": self.target.key, "anthropic-version": "2023-06-01"}
        else:
            reply = _chat_answer(answer)
            self.target.openai.script(*[ChatReply.message(**reply)] * times)
            url, body = "/proxy/openai/v1/chat/completions", self._openai(history, odd)
            headers = {"authorization": f"Bearer {self.target.key}"}
        data = json.dumps(_reversed(body) if self.how.reversed_keys and odd else body)
        headers["content-type"] = "application/json"
        for _ in range(times):
            response = self.http.post(self.target.url + url, content=data, headers=headers)
            assert response.status_code == 200, (number, response.status_code, response.text)

    def _anthropic(self, history: list[dict[str, Any]], system: str, odd: bool) -> dict[str, Any]:
        messages = copy.deepcopy(history)
        if self.how.blocks and odd:
            messages = [{**m, "content": _blocks(m["content"])} for m in messages]
        if self.how.defaults and odd:
            _add_defaults(messages)
        if self.how.cache_moves:
            _move_breakpoints(messages, self.target.sent)
        listed = self.how.system_list and odd
        return {
            "model": "claude-replay",
            "max_tokens": 64,
            "system": [{"type": "text", "text": system}] if listed else system,
            "tools": _TOOLS,
            "messages": messages,
            "metadata": self.metadata,
        }

    def _openai(self, history: list[dict[str, Any]], odd: bool) -> dict[str, Any]:
        said = [{**m, "content": _chat_expressible(m["role"], m["content"])} for m in history]
        messages = [chat for m in said for chat in to_openai([m])["messages"]]
        if self.how.blocks and odd:
            for chat in messages:
                if chat["role"] in {"user", "assistant"} and isinstance(chat.get("content"), str):
                    chat["content"] = _blocks(chat["content"])
        return {"model": "gpt-replay", "messages": messages}


def _content(form: str) -> Any:
    """The content of a message in canonical form (tests/support/replay.py), with the
    empty values a request needs that the form leaves out (a tool call's `input: {}`)."""
    content = json.loads(form).get("content", "")
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_use":
            block.setdefault("input", {})
    return content


def _call_ids(message: dict[str, Any]) -> set[str]:
    content = message["content"]
    blocks = content if isinstance(content, list) else []
    return {str(b.get("id")) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"}


def _blocks(content: Any) -> Any:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _chat_answer(answer: dict[str, Any]) -> dict[str, Any]:
    """An assistant message as a Chat Completions answer: its text parts as one string
    (an answer's content is a string or null)."""
    said = {**answer, "content": _chat_expressible("assistant", answer["content"])}
    (message,) = to_openai([said])["messages"]
    parts = message.get("content")
    if isinstance(parts, list):
        message["content"] = "\n\n".join(str(p.get("text", "")) for p in parts) or None
    return {key: value for key, value in message.items() if key != "role"}


def _add_defaults(messages: list[dict[str, Any]]) -> None:
    """Null and false fields in the answers, which mean "absent" (sessions_app/canonical.py)."""
    for message in messages:
        if message["role"] != "assistant" or not isinstance(message["content"], list):
            continue
        for block in message["content"]:
            if block.get("type") == "text":
                block.setdefault("citations", None)
            elif block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
                block["input"].setdefault("replace_all", False)


def _move_breakpoints(messages: list[dict[str, Any]], number: int) -> None:
    """A breakpoint on the newest message's last block and on an earlier one that moves
    with `number`, as Claude Code sets them (any left from a copy removed first)."""
    for block in _all_blocks(messages):
        block.pop("cache_control", None)
    lists = [m["content"] for m in messages if isinstance(m["content"], list) and m["content"]]
    for chosen in {len(lists) - 1, number % len(lists)} if lists else ():
        if isinstance(lists[chosen][-1], dict):
            lists[chosen][-1]["cache_control"] = {"type": "ephemeral"}


def _all_blocks(messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for message in messages:
        content = message["content"]
        yield from (b for b in content if isinstance(b, dict)) if isinstance(content, list) else ()


def _reversed(value: Any) -> Any:
    """The same JSON, every object's keys in reverse order."""
    if isinstance(value, dict):
        return {key: _reversed(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed(item) for item in value]
    return value
