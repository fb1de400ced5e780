"""Benchmark: the watcher's rescan of many transcripts none of which changed (issue 30 item 7).

In a throwaway SQLite database, FILES small Claude Code session files (two exchanges each,
one per folder as Claude Code keeps projects) are written, scanned once (every file
imported: the first scan), then scanned again, unchanged: by the same watcher (a running
`watch_transcripts`) and by a new one (a restarted watcher, or `watch_transcripts --once`).
An unchanged file must cost one `stat`: the goal is a rescan of 3,000 unchanged files in
under 0.5 s (the fastest of three runs each). Results are printed, never committed.

Run: .venv/bin/python -m bench.rescan [--files 3000] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import django_owner, goal, table  # noqa: E402

#: The rescan of this many unchanged files must take under GOAL_SECONDS.
GOAL_FILES = 3000
GOAL_SECONDS = 0.5
RUNS = 3


def _session(number: int) -> str:
    """A two-exchange Claude Code session file's text."""
    session = f"bench-rescan-{number:06d}"
    records: list[dict[str, Any]] = []
    parent = None
    for turn in range(2):
        prompt, reply = f"{session}-u{turn}", f"{session}-a{turn}"
        common = {"sessionId": session, "isSidechain": False, "timestamp": "2025-12-01T10:00:00Z"}
        records.append(
            {
                **common,
                "type": "user",
                "uuid": prompt,
                "parentUuid": parent,
                "message": {"role": "user", "content": f"question {turn} of {number}"},
            }
        )
        records.append(
            {
                **common,
                "type": "assistant",
                "uuid": reply,
                "parentUuid": prompt,
                "message": {
                    "id": f"msg-{reply}",
                    "role": "assistant",
                    "model": "claude-bench",
                    "content": [{"type": "text", "text": f"answer {turn}"}],
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                },
            }
        )
        parent = reply
    return "".join(json.dumps(r) + "\n" for r in records)


def write_tree(folder: Path, files: int) -> None:
    """`files` session files, a hundred per project folder."""
    for number in range(files):
        project = folder / f"-home-user-project-{number // 100:03d}"
        project.mkdir(exist_ok=True)
        (project / f"bench-rescan-{number:06d}.jsonl").write_text(_session(number))


def _fastest(action: Any) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        changed = action()
        times.append(time.perf_counter() - started)
        assert changed == [], changed  # nothing changed: nothing may be stored
    return min(times)


def _child(folder: Path) -> dict[str, float]:
    owner = django_owner("ctxweb-bench-rescan-")
    from sessions_app.services.importing.watching import Watcher

    watcher = Watcher(owner, [folder])
    started = time.perf_counter()
    watcher.scan()
    first = time.perf_counter() - started
    same = _fastest(watcher.scan)
    fresh = _fastest(lambda: Watcher(owner, [folder]).scan())
    return {"first": first, "same": same, "fresh": fresh}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--files", type=int, default=GOAL_FILES)
    parser.add_argument("--smoke", action="store_true", help="100 files")
    parser.add_argument("--child", metavar="FOLDER", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(Path(args.child))))
        return
    files = 100 if args.smoke else args.files
    with tempfile.TemporaryDirectory(prefix="ctxweb-bench-rescan-") as folder:
        write_tree(Path(folder), files)
        output = subprocess.run(
            [sys.executable, "-m", "bench.rescan", "--child", folder],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    result = json.loads(output.strip().splitlines()[-1])
    print("## Watcher: rescanning unchanged transcripts (`rescan.py`)\n")
    print(
        table(
            ("files", "first scan", "rescan, same watcher", "rescan, restarted watcher"),
            [
                (
                    str(files),
                    f"{result['first']:.1f} s",
                    f"{result['same'] * 1000:.0f} ms",
                    f"{result['fresh'] * 1000:.0f} ms",
                )
            ],
        )
    )
    scale = GOAL_FILES / files
    print()
    for label, key in (("the same watcher", "same"), ("a restarted watcher", "fresh")):
        print(
            goal(
                f"rescan of {GOAL_FILES:,} unchanged transcripts by {label} < {GOAL_SECONDS} s "
                f"({result[key] * scale * 1000:.0f} ms"
                + (f", scaled from {files}" if files != GOAL_FILES else "")
                + ")",
                result[key] * scale < GOAL_SECONDS,
            )
        )


if __name__ == "__main__":
    main()
