"""A deterministic, synthetic long-running coding-agent session for the demo.

`agent_rounds(seed)` yields rounds of Anthropic-style messages: a user request, a few tool
calls (Read/Grep/Edit/Bash) with results of varied sizes, an occasional failing one, and an
assistant reply. Nothing here touches the database: seed_demo appends the rounds through the
session services and compacts whenever the context check asks for it.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from typing import Any, Final

__all__ = ["TITLE", "agent_rounds"]

TITLE: Final = "Demo: long-running coding agent (synthetic)"

_MODULES: Final = (
    "inventory/models.py",
    "inventory/api.py",
    "inventory/pricing.py",
    "inventory/importers/csv_feed.py",
    "inventory/importers/supplier_xml.py",
    "inventory/tasks.py",
    "inventory/search.py",
    "inventory/cli.py",
    "tests/test_pricing.py",
    "tests/test_api.py",
    "tests/test_importers.py",
    "tests/test_search.py",
)
_REQUESTS: Final = (
    "The nightly CSV import drops rows whose SKU has a leading zero. Can you fix it?",
    "Add a `discount_percent` field to Product and expose it in the API.",
    "Search is slow for long queries; profile it and make it faster.",
    "Please add retries with backoff to the supplier XML importer.",
    "The pricing rounding is off by one cent for some currencies. Investigate.",
    "Write tests for the bulk update endpoint, it has none.",
    "Refactor the CLI so every command shares the same option parsing.",
    "A customer reports 500s on /api/products?page=0. Please fix and add a regression test.",
    "Make the stock-level task idempotent; it double-counts when retried.",
    "Update the README with the new import options.",
)
_THOUGHTS: Final = (
    "Let me look at how this is implemented first.",
    "I'll check the tests that cover this area.",
    "Now I'll make the change.",
    "Let me run the relevant tests.",
    "I'll search for other call sites before changing the signature.",
)
_REPLIES: Final = (
    "Done. The root cause was {cause}; I changed {path} and added a test. All {n} tests pass.",
    "Fixed in {path}: {cause}. The full suite passes ({n} tests).",
    "I've finished this. {cause} was the culprit; {path} now handles it and {n} tests pass.",
)
_CAUSES: Final = (
    "an int() conversion of the SKU column",
    "a missing index on (supplier_id, sku)",
    "float arithmetic before rounding",
    "page numbers starting at 1 while the code assumed 0",
    "the task re-reading a stale stock row",
    "a shared mutable default argument",
)
_ERRORS: Final = (
    "Traceback (most recent call last):\n"
    '  File "{path}", line {line}, in <module>\n'
    "AssertionError: expected Decimal('19.99'), got Decimal('20.00')",
    "Error: old_string not found in {path}. Read the file again before editing.",
    "FAILED tests/test_api.py::test_page_zero - KeyError: 'page'\n1 failed, {n} passed",
    "ModuleNotFoundError: No module named 'inventory.utils'",
)


def _code(rng: random.Random, path: str, lines: int) -> str:
    """A plausible numbered Python listing of `lines` lines."""
    name = path.rsplit("/", 1)[-1].removesuffix(".py")
    out = [f'"""{name}: part of the inventory service."""', "", "from decimal import Decimal"]
    while len(out) < lines:
        func = f"{rng.choice(('load', 'parse', 'apply', 'price', 'sync', 'find'))}_{len(out)}"
        out += [
            "",
            f"def {func}(row: dict[str, str]) -> Decimal:",
            f'    """{rng.choice(_THOUGHTS)}"""',
            f"    value = row.get({rng.choice(('sku', 'price', 'qty', 'supplier'))!r}, '0')",
            f"    return Decimal(value).quantize(Decimal('0.{rng.randint(1, 99):02d}'))",
        ]
    return "\n".join(f"{i:>5}\t{text}" for i, text in enumerate(out[:lines], start=1))


def _tests_output(rng: random.Random, count: int) -> str:
    dots = "".join(rng.choice("....................s") for _ in range(count))
    lines = [f"tests/{path.rsplit('/', 1)[-1]} {dots[i::4]}" for i, path in enumerate(_MODULES[8:])]
    return "\n".join(
        [*lines, f"========== {count} passed in {rng.uniform(0.4, 9):.2f}s =========="]
    )


def _tool(rng: random.Random, tool_id: str, failing: bool) -> tuple[dict[str, Any], str]:
    """One tool call block and the text of its result."""
    path = rng.choice(_MODULES)
    name = rng.choices(("Read", "Grep", "Edit", "Bash"), weights=(4, 2, 3, 3))[0]
    result: str
    if name == "Read":
        tool_input: dict[str, Any] = {"file_path": path}
        result = _code(rng, path, rng.choice((20, 40, 80, 160, 320)))
    elif name == "Grep":
        pattern = rng.choice(("def price", "Decimal(", "sku", "TODO", "retry"))
        tool_input = {"pattern": pattern, "path": "inventory/"}
        hits = rng.sample(_MODULES, rng.randint(1, 6))
        result = "\n".join(f"{hit}:{rng.randint(1, 400)}: {pattern} ..." for hit in hits)
    elif name == "Edit":
        tool_input = {
            "file_path": path,
            "old_string": "int(row['sku'])",
            "new_string": "row['sku']",
        }
        result = f"The file {path} has been updated."
    else:
        command = rng.choice(("pytest -q", f"pytest -q {path}", "ruff check .", "git diff --stat"))
        tool_input = {"command": command}
        result = _tests_output(rng, rng.randint(40, 400)) if "pytest" in command else "ok"
    if failing:
        result = rng.choice(_ERRORS).format(
            path=path, line=rng.randint(2, 300), n=rng.randint(40, 400)
        )
    block = {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}
    return block, result


def _round(rng: random.Random, ids: Iterator[int]) -> list[dict[str, Any]]:
    """A user request, 2-6 tool steps with their results, then the assistant's reply."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": rng.choice(_REQUESTS)}]
    for _ in range(rng.randint(2, 6)):
        tool_id = f"toolu_demo_{next(ids):05d}"
        failing = rng.random() < 0.08
        block, result = _tool(rng, tool_id, failing=failing)
        thought = {"type": "text", "text": rng.choice(_THOUGHTS)}
        messages.append({"role": "assistant", "content": [thought, block]})
        answer: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": result}
        if failing:
            answer["is_error"] = True
        messages.append({"role": "user", "content": [answer]})
    reply = rng.choice(_REPLIES).format(
        cause=rng.choice(_CAUSES), path=rng.choice(_MODULES), n=rng.randint(40, 400)
    )
    messages.append({"role": "assistant", "content": [{"type": "text", "text": reply}]})
    return messages


def agent_rounds(seed: int = 2026) -> Iterator[list[dict[str, Any]]]:
    """Endless deterministic rounds of agent traffic (stop after as many as you need)."""
    rng = random.Random(seed)
    ids = itertools.count(1)
    while True:
        yield _round(rng, ids)
