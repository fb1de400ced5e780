"""Benchmark: the watcher's scan cost on a large Claude Code file growing by small appends
(issue 13): a scan must cost the new bytes, not the file size.

For each size (a tenth of --size-mb, then --size-mb), in a throwaway SQLite database: the
synthetic session of bench/import.py is written and read once by the watcher (the first
read imports it all), then APPENDS small exchanges (a prompt and a reply, about 1 KB) are
appended one at a time, each followed by one scan of the file (`sync_file`). The median and
worst scan times should be the same for both sizes. Results are printed, never committed.

Run: .venv/bin/python -m bench.watch [--size-mb 200] [--appends 50] [--smoke]
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import django_owner, table  # noqa: E402

generator: Any = importlib.import_module("bench.import")  # `import` is a keyword


def _exchange(number: int) -> str:
    """One prompt and its reply, as Claude Code lines (about 1 KB)."""
    prompt = f"u-watch-{number}"
    records = [
        {
            "type": "user",
            "uuid": prompt,
            "parentUuid": None,
            "sessionId": generator.SESSION,
            "isSidechain": False,
            "timestamp": "2025-12-01T10:00:00.000Z",
            "message": {"role": "user", "content": f"question {number}: " + "why? " * 60},
        },
        {
            "type": "assistant",
            "uuid": f"a-watch-{number}",
            "parentUuid": prompt,
            "sessionId": generator.SESSION,
            "isSidechain": False,
            "timestamp": "2025-12-01T10:00:01.000Z",
            "message": {
                "id": f"msg-watch-{number}",
                "role": "assistant",
                "model": "claude-bench",
                "content": [{"type": "text", "text": "because " * 60}],
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
        },
    ]
    return "".join(json.dumps(r) + "\n" for r in records)


def _child(path: Path, appends: int) -> dict[str, Any]:
    owner = django_owner("ctxweb-bench-watch-")
    from sessions_app.services.importing.watching import sync_file

    started = time.perf_counter()
    sync_file(owner, path)
    first = time.perf_counter() - started
    scans = []
    for number in range(appends):
        with open(path, "a", encoding="utf-8") as out:
            out.write(_exchange(number))
        started = time.perf_counter()
        result = sync_file(owner, path)
        scans.append(time.perf_counter() - started)
        assert result.added >= 1, result
    return {"first": first, "median": statistics.median(scans), "worst": max(scans)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--appends", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help="2 MB, 5 appends")
    parser.add_argument("--child", nargs=2, metavar=("PATH", "APPENDS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(Path(args.child[0]), int(args.child[1]))))
        return
    size_mb, appends = (2, 5) if args.smoke else (args.size_mb, args.appends)
    rows = []
    for megabytes in (max(1, size_mb // 10), size_mb):
        with tempfile.TemporaryDirectory(prefix="ctxweb-bench-watch-") as folder:
            path = Path(folder) / f"{generator.SESSION}.jsonl"
            generator.generate(path, megabytes)
            output = subprocess.run(
                [sys.executable, "-m", "bench.watch", "--child", str(path), str(appends)],
                cwd=ROOT,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            result = json.loads(output.strip().splitlines()[-1])
            rows.append(
                (
                    f"{megabytes} MB",
                    f"{result['first']:.1f} s",
                    f"{result['median'] * 1000:.0f} ms",
                    f"{result['worst'] * 1000:.0f} ms",
                )
            )
    print(table(("file", "first read", "scan after an append (median)", "worst"), rows))


if __name__ == "__main__":
    main()
