"""Run every benchmark and write their results: `python -m bench [--smoke] [--output FILE]`.

Each script runs in its own process (`python -m bench.NAME`), prints its section as
Markdown, and the sections go into one file under a header saying where and when the
figures were taken: date, commit, machine, load average, versions. Nothing in the file is
typed by hand. `make bench` writes bench/results.md; `make bench-smoke` (part of
`make test`) runs every script with tiny sizes into a scratch file, to prove they still
run; it checks no figure.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: In the order they run (and appear): engine first, then the web app.
SCRIPTS = (
    "tokens",
    "fold",
    "compact",
    "truncate",
    "quality",
    "api",
    "appends",
    "import",
    "search",
    "rescan",
    "ui",
    "proxy",
    "never_blocked",
    "load",
)
SMOKE_ARGS = {"load": ["--seconds", "3", "--clients", "2", "--databases", "sqlite"]}
FULL_ARGS: dict[str, list[str]] = {}


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip()


def _memory_gb() -> str:
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return "?"
    return f"{pages / 1e9:.0f} GB"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def header(started: datetime.datetime, load_before: str) -> str:
    commit = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = (
        " (with uncommitted changes)"
        if _git("status", "--porcelain", "--untracked-files=no")
        else ""
    )
    packages = ", ".join(
        f"{name} {_version(name)}"
        for name in ("tiktoken", "tree-sitter", "Django", "psycopg", "langchain-core")
    )
    return "\n".join(
        [
            "# Benchmark results",
            "",
            "Written by `make bench` (`python -m bench`) from one run; every figure below was",
            "printed by the scripts themselves (bench/README.md says what each one measures).",
            "Absolute times move with the machine and its load; ratios taken in the same process",
            "and run are the comparable figures.",
            "",
            f"- date: {started:%Y-%m-%d %H:%M} UTC",
            f"- commit: {commit}{dirty}",
            f"- machine: {platform.machine()}, {os.cpu_count()} cores, {_memory_gb()} RAM, "
            f"{platform.system()} {platform.release()}, Python {platform.python_version()}",
            f"- load average (1, 5, 15 min) at the start: {load_before}; at the end: {_load()}",
            f"- packages: {packages}",
            "",
        ]
    )


def _load() -> str:
    try:
        return ", ".join(f"{value:.1f}" for value in os.getloadavg())
    except OSError:
        return "?"


def _command(name: str, smoke: bool) -> list[str]:
    extra = SMOKE_ARGS.get(name, []) if smoke else FULL_ARGS.get(name, [])
    return [sys.executable, "-m", f"bench.{name}", *(["--smoke"] if smoke else []), *extra]


def run_scripts(names: list[str], smoke: bool, parallel: int) -> list[tuple[str, float]]:
    """Each script's Markdown and wall time, in the order of `names`.

    Full runs go one at a time (a script running beside another would slow it down); a
    smoke run, which keeps no figure, runs `parallel` at a time.
    """
    results: dict[str, tuple[str, float]] = {}
    waiting = list(names)
    running: dict[str, tuple[subprocess.Popen[str], float]] = {}
    while waiting or running:
        while waiting and len(running) < parallel:
            name = waiting.pop(0)
            print(f"== bench/{name}.py", file=sys.stderr, flush=True)
            process = subprocess.Popen(
                _command(name, smoke), cwd=ROOT, stdout=subprocess.PIPE, text=True
            )
            running[name] = (process, time.monotonic())
        finished = next((n for n, (p, _) in running.items() if p.poll() is not None), None)
        if finished is None:
            time.sleep(0.05)
            continue
        process, started = running.pop(finished)
        output = process.stdout.read() if process.stdout else ""
        if process.returncode:
            for other, _ in running.values():
                other.kill()
            raise SystemExit(f"bench/{finished}.py failed (exit {process.returncode})")
        results[finished] = (output.strip(), time.monotonic() - started)
    return [results[name] for name in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, every script once")
    parser.add_argument("--output", type=Path, help="where to write the results")
    parser.add_argument("--only", help="comma-separated script names")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",")] if args.only else list(SCRIPTS)
    started = datetime.datetime.now(datetime.UTC)
    load_before = _load()
    clock = time.monotonic()
    outputs = run_scripts(names, args.smoke, parallel=3 if args.smoke else 1)
    sections = [text for text, _ in outputs]
    timings = [f"{name} {seconds:.0f} s" for name, (_, seconds) in zip(names, outputs, strict=True)]
    goals = [
        line for section in sections for line in section.splitlines() if line.startswith("- goal:")
    ]
    document = "\n".join(
        [
            header(started, load_before),
            f"Scripts run: {', '.join(timings)}; {time.monotonic() - clock:.0f} s in all.",
            "",
            "## Goals",
            "",
            *goals,
            "",
            *(f"{section}\n" for section in sections),
        ]
    )
    if args.output:
        args.output.write_text(document, encoding="utf-8")
        print(f"bench: wrote {args.output} ({len(goals)} goals)", file=sys.stderr)
    else:
        print(document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
