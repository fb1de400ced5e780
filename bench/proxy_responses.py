"""The Responses route's part of bench/proxy.py (issue 25): the same conversations as
OpenAI Responses `input` items (a developer message, then the history; the tools as
function tools; each answer's output items sent back), through `/proxy/openai/v1/responses`
and straight to a local Responses server, interleaved; the added latency is the difference
of the medians, with the Messages route's goal."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from typing import Any

from bench.common import goal, log

__all__ = ["measured_responses", "responses_goal"]


def _percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class _ResponsesConversation:
    """The same conversation as a Responses client sends it: `input` items (a developer
    message, then the history as messages), the answer's output items sent back."""

    def __init__(self, history: list[Any], system: str, tools: list[dict[str, Any]]) -> None:
        self.items: list[Any] = [{"type": "message", "role": "developer", "content": system}]
        self.items.extend(
            {"type": "message", "role": m["role"], "content": _text_of(m["content"])}
            for m in history
        )
        self.tools = [
            {
                "type": "function",
                "name": t["name"],
                "description": t["description"],
                "parameters": t["input_schema"],
            }
            for t in tools
        ]
        self.turn = 0

    def body(self, *, stream: bool = False) -> bytes:
        payload = {
            "model": "bench",
            "input": self.items,
            "tools": self.tools,
            "store": False,
            "stream": stream,
        }
        return json.dumps(payload).encode()

    def advance(self, answer: Any) -> None:
        self.turn += 1
        note = {"role": "user", "content": f"Carry on with step {self.turn}."}
        self.items = [*self.items, *answer["output"], {"type": "message", **note}]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text") or b.get("content") or "") for b in content)


def _responses_latency(
    http: Any, proxy: str, direct: str, conversation: _ResponsesConversation, runs: int
) -> dict[str, Any]:
    """bench/proxy.py's added latency, for the Responses route."""
    headers = {
        "content-type": "application/json",
        "authorization": f"Bearer {http.headers['x-api-key']}",
    }
    first = http.post(proxy, content=conversation.body(), headers=headers)  # stores it all
    assert first.status_code == 200, first.text
    conversation.advance(first.json())
    through, straight = [], []
    for _ in range(runs):
        body = conversation.body()
        started = time.perf_counter()
        assert http.post(direct, content=body, headers=headers).status_code == 200
        straight.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        response = http.post(proxy, content=body, headers=headers)
        through.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.text
        conversation.advance(response.json())
    return {
        "proxy p50": statistics.median(through),
        "direct p50": statistics.median(straight),
        "added p50": statistics.median(through) - statistics.median(straight),
        "added p95": _percentile(through, 0.95) - _percentile(straight, 0.95),
        "bytes": len(conversation.body()),
    }


def measured_responses(
    fake: Any,
    url: str,
    key: str,
    histories: dict[str, list[Any]],
    runs: int,
    overhead: tuple[str, list[dict[str, Any]]],
) -> dict[str, Any]:
    """Added latency of the Responses route at each size."""
    import httpx

    proxy, direct = f"{url}/proxy/openai/v1/responses", f"{fake.base_url}/v1/responses"
    sizes: dict[str, Any] = {}
    with httpx.Client(timeout=120, headers={"x-api-key": key}) as http:
        for label, history in histories.items():
            log(f"proxy: Responses route, added latency at {label} tokens")
            conversation = _ResponsesConversation(history, *overhead)
            sizes[label] = _responses_latency(http, proxy, direct, conversation, runs)
            fake.requests.clear()
    return sizes


def responses_goal(sizes: dict[str, dict[str, float]], largest: str, limit_ms: float) -> str:
    """The goal line of the Responses route at the largest history."""
    added = sizes[largest]["added p50"]
    return goal(
        f"Responses route: added latency p50 at {largest} = {added:.1f} ms (< {limit_ms:.0f} ms)",
        added < limit_ms,
    )
