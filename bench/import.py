"""Benchmark: importing a large Claude Code session file (issue 5): MB/s and peak memory.

Writes a synthetic Claude Code JSONL of at least 200 MB into a temporary folder: rounds of a
user prompt, a streamed response (thinking, text and two parallel tool calls on one line
each, as Claude Code writes them), two tool results with their `toolUseResult` data (a
few KB each, as big file reads and command outputs are), hook attachments and progress lines,
a rewind every 500 rounds and an agent compaction (boundary and summary) every 2,000 rounds.
Then, each in a fresh child process so the peak resident memory is its own:

1. parse: `sessions_app.importers.parse` (two streamed passes; messages spill to a
   temporary file past a few MB), iterating every message once;
2. store: `sessions_app.services.importing.import_file` into a throwaway SQLite database (parse,
   token counts, Message/ContextEntry/Compaction rows, archives, the raw file kept).

Run: .venv/bin/python -m bench.import [--size-mb 200] [--skip-store] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import table  # noqa: E402

SESSION = "bench-0000-0000-0000-000000000000"


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":")) + "\n"


def _base(kind: str, uuid: str, parent: str | None, when: int, **extra: Any) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/project",
        "sessionId": SESSION,
        "version": "2.1.0",
        "gitBranch": "main",
        "type": kind,
        "uuid": uuid,
        "timestamp": f"2025-11-{1 + when // 86400 % 28:02d}T{when // 3600 % 24:02d}:"
        f"{when // 60 % 60:02d}:{when % 60:02d}.000Z",
        **extra,
    }


def _payload(round_: int, call: int, size: int) -> str:
    lines = [
        f"{n:>6}\tdef handler_{round_}_{call}_{n}(request, *args):  # returns the value for row {n}"
        for n in range(1, size // 80)
    ]
    return "\n".join(lines)


def generate(path: Path, size_mb: int) -> tuple[int, int]:
    """Write the synthetic session; returns (bytes, lines)."""
    target = size_mb * 1024 * 1024
    with open(path, "w", encoding="utf-8") as out:
        writer = _Writer(out)
        writer.emit({"type": "permission-mode", "permissionMode": "default", "sessionId": SESSION})
        round_ = 0
        while writer.written < target:
            round_ += 1
            writer.round(round_)
    return writer.written, writer.lines


class _Writer:
    """The session's lines, written in order: each line's parent and time follow the last."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.written = self.lines = 0
        self.parent: str | None = None
        self.when = 0

    def emit(self, record: dict[str, Any]) -> str:
        text = _line(record)
        self.out.write(text)
        self.written += len(text.encode())
        self.lines += 1
        self.when += 7
        return str(record.get("uuid", self.parent))

    def line(self, kind: str, uuid: str, parent: str | None, **fields: Any) -> str:
        """One `_base` line at the current time."""
        return self.emit(_base(kind, uuid, parent, self.when, **fields))

    def round(self, round_: int) -> None:
        """A prompt (retried after a rewind every 500 rounds), thinking, two reads and
        their results, the answer; a compaction every 2000 rounds."""
        prompt = self._prompt(round_)
        mid = f"msg_{round_:07d}"
        thinking = {
            "type": "thinking",
            "thinking": f"Round {round_}: read both files.",
            "signature": "c2ln",
        }
        last = self.line(
            "assistant", f"a{round_}t", prompt, message=_reply(round_, mid, [thinking])
        )
        last = self.line(
            "assistant",
            f"a{round_}x",
            last,
            message=_reply(round_, mid, [_text("Reading the files.")]),
        )
        result_parent = self._results(round_, self._calls(round_, mid, last))
        self.emit(
            {
                "parentUuid": result_parent,
                "type": "progress",
                "uuid": f"p{round_}",
                "data": {"type": "hook_progress"},
                "sessionId": SESSION,
            }
        )
        done = _reply(round_, f"{mid}f", [_text(f"Done with step {round_}.")])
        self.parent = self.line("assistant", f"a{round_}f", result_parent, message=done)
        if round_ % 2000 == 0:
            self._boundary(round_)

    def _prompt(self, round_: int) -> str:
        prompt = f"u{round_}"
        fork_parent = self.parent
        content = f"Step {round_}: look at module {round_ % 97}."
        self.line("user", prompt, self.parent, message={"role": "user", "content": content})
        if round_ % 500 == 0:  # a rewind: this attempt is abandoned, retried below
            abandoned = _reply(round_, "x", [_text("abandoned")])
            self.line("assistant", f"x{round_}", prompt, message=abandoned)
            prompt = f"u{round_}b"
            again = {"role": "user", "content": "Try again."}
            self.line("user", prompt, fork_parent, message=again)
        return prompt

    def _calls(self, round_: int, mid: str, last: str) -> list[tuple[str, str]]:
        calls = []
        for call in (1, 2):
            tool_id = f"toolu_{round_:07d}_{call}"
            use = {
                "type": "tool_use",
                "id": tool_id,
                "name": "Read",
                "input": {"file_path": f"/src/m{round_}_{call}.py"},
            }
            last = self.line(
                "assistant", f"a{round_}c{call}", last, message=_reply(round_, mid, [use])
            )
            calls.append((tool_id, last))
        return calls

    def _results(self, round_: int, calls: list[tuple[str, str]]) -> str:
        result_parent = calls[-1][1]
        for call, (tool_id, call_line) in enumerate(calls, start=1):
            body = _payload(round_, call, 4000 + (round_ * 997 + call * 131) % 5000)
            result = {"type": "tool_result", "tool_use_id": tool_id, "content": body}
            result_parent = self.line(
                "user",
                f"r{round_}_{call}",
                call_line,
                message={"role": "user", "content": [result]},
                toolUseResult={
                    "type": "text",
                    "file": {"filePath": f"/src/m{round_}_{call}.py", "content": body},
                },
            )
            hook = {"type": "hook_success", "hookName": "PostToolUse", "content": ""}
            result_parent = self.line(
                "attachment", f"h{round_}_{call}", result_parent, attachment=hook
            )
        return result_parent

    def _boundary(self, round_: int) -> None:
        boundary = self.line(
            "system",
            f"b{round_}",
            None,
            subtype="compact_boundary",
            logicalParentUuid=self.parent,
            content="Conversation compacted",
            compactMetadata={"trigger": "auto", "preTokens": 160000},
        )
        summary = {"role": "user", "content": f"Summary of steps up to {round_}."}
        self.parent = self.line(
            "user", f"s{round_}", boundary, isCompactSummary=True, message=summary
        )


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def _reply(round_: int, mid: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": "claude-bench",
        "content": content,
        "usage": {"input_tokens": 1000 + round_, "output_tokens": 50},
    }


# -- measurements (child processes) ------------------------------------------------------------


def _child(mode: str, path: Path) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    if mode == "store":
        os.environ["CTXWEB_DATA_DIR"] = tempfile.mkdtemp(prefix="ctxweb-bench-import-")
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from compaction import get_encoding

        call_command("migrate", verbosity=0)
        get_encoding()  # load the vocabulary before timing
        owner = get_user_model().objects.create_user("bench")
        from sessions_app.services.importing import import_file

        baseline = _rss_mb()
        started = time.perf_counter()
        report = import_file(owner, path)
        elapsed = time.perf_counter() - started
        counts = report.counts
    else:
        from sessions_app.importers import parse

        baseline = _rss_mb()
        started = time.perf_counter()
        session = parse(path)
        messages = sum(1 for _ in session.messages)  # read every message back once
        elapsed = time.perf_counter() - started
        counts = {**session.counts(), "iterated": messages}
        session.close()
    return {"seconds": elapsed, "baseline_mb": baseline, "peak_mb": _rss_mb(), "counts": counts}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


def _measure(mode: str, path: Path) -> dict[str, Any]:
    output = subprocess.run(
        [sys.executable, "-m", "bench.import", "--child", mode, str(path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--skip-store", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="a 1 MB file")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child[0], Path(args.child[1]))))
        return
    size_mb = 1 if args.smoke else args.size_mb
    rows = []
    with tempfile.TemporaryDirectory(prefix="ctxweb-bench-import-") as folder:
        path = Path(folder) / f"{SESSION}.jsonl"
        started = time.perf_counter()
        size, lines = generate(path, size_mb)
        megabytes = size / 1024 / 1024
        took = time.perf_counter() - started
        for mode in ("parse", "store") if not args.skip_store else ("parse",):
            print(f"import: {mode}", file=sys.stderr, flush=True)
            result = _measure(mode, path)
            rows.append(
                [
                    mode,
                    f"{result['seconds']:.1f} s",
                    f"{megabytes / result['seconds']:.1f} MB/s",
                    f"{result['peak_mb']:.0f} MB ({result['baseline_mb']:.0f} MB)",
                    ", ".join(
                        f"{k}: {v:,}" for k, v in result["counts"].items() if isinstance(v, int)
                    ),
                ]
            )
    print("## Importing a large Claude Code file: `bench/import.py`\n")
    print(
        f"A synthetic Claude Code session file of {megabytes:.0f} MB, {lines:,} lines (written "
        f"in {took:.0f} s); each step in a fresh child process (peak RSS: its `ru_maxrss`; in "
        "brackets: after imports). Store: SQLite.\n"
    )
    print(table(["step", "time", "throughput", "peak RSS (after imports)", "result"], rows))


if __name__ == "__main__":
    main()
