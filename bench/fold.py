"""Benchmark: fold every .py file of the installed Django package (seed 002 §2, §5).

Prints the time to fold them all with the default 10000-token budget and with no effective
budget, how many files and bytes went in, the tokens of the sources and of the outlines, and
how many tiktoken passes the fold made (at most two: one count, one recount after a drop).

Run: .venv/bin/python bench/fold.py
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import django

from compaction.folding import fold
from compaction.policy import Policy
from compaction.tokens import get_encoding


def django_sources() -> list[tuple[str, str]]:
    root = Path(django.__file__).parent
    files = []
    for path in sorted(root.rglob("*.py")):
        files.append((str(path.relative_to(root.parent)), path.read_text(encoding="utf-8")))
    return files


def main() -> None:
    files = django_sources()
    size = sum(len(source.encode()) for _, source in files)
    encoding = get_encoding()
    started = time.perf_counter()
    source_tokens = sum(len(t) for t in encoding.encode_ordinary_batch([s for _, s in files]))
    count_seconds = time.perf_counter() - started
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"input: {len(files)} .py files of Django {django.__version__}, {size / 1e6:.1f} MB")
    print(
        f"tokens of the sources: {source_tokens:,} (counting them once took {count_seconds:.2f} s)"
    )
    for label, policy in (
        ("default budget (10000 tokens)", Policy()),
        ("no effective budget", Policy(fold_max_tokens=10**9)),
    ):
        fold(files[:5], policy=policy)  # warm the grammar and the encoding
        started = time.perf_counter()
        result = fold(files, policy=policy)
        seconds = time.perf_counter() - started
        print(
            f"{label}: {seconds:.2f} s, {result.tokens:,} tokens out, "
            f"{result.lines:,} outline lines, {result.dropped_lines:,} dropped "
            f"(drop ratio {result.drop_ratio:.2f}), {result.tiktoken_passes} tiktoken passes"
        )


if __name__ == "__main__":
    main()
