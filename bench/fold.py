"""Benchmark: fold every .py file of the installed Django package (docs/behaviour.md#file-outlines).

Folds them all in one `fold()` call with the default 10000-token budget and with no
effective budget, cold (outline cache emptied first: every file parsed by tree-sitter) and
warm (outlines cached by content, as a second fold of the same files finds them). Printed:
files and bytes in, tokens of the sources and of the outlines, tiktoken passes (at most
two: one count, one recount after a drop), and each time against one raw tiktoken pass
over the sources.

Run: .venv/bin/python -m bench.fold [--smoke]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import django

from bench.common import fastest, options, raw_tiktoken_pass, table
from compaction import Policy
from compaction.folding import FoldResult, fold, outline

RUNS = 3


def django_sources() -> list[tuple[str, str]]:
    root = Path(django.__file__).parent
    files = []
    for path in sorted(root.rglob("*.py")):
        files.append((str(path.relative_to(root.parent)), path.read_text(encoding="utf-8")))
    return files


def _row(
    label: str,
    policy: Policy,
    files: list[tuple[str, str]],
    raw: Callable[[], int],
    runs: int,
) -> list[object]:
    """One budget's row: cold and warm `fold()` against the raw pass, and what came out."""
    results: list[FoldResult] = []

    def cold() -> None:
        outline.clear_outline_cache()
        results.append(fold(files, policy=policy))

    def warm() -> None:
        fold(files, policy=policy)

    fold(files[:5], policy=policy)  # warm the grammars and the encoding
    best = fastest(runs, raw=raw, cold=cold, warm=warm)
    result = results[-1]
    return [
        label,
        f"{best['cold'] * 1000:.0f} ms ({best['cold'] / best['raw']:.2f}x)",
        f"{best['warm'] * 1000:.0f} ms ({best['warm'] / best['raw']:.2f}x)",
        f"{best['raw'] * 1000:.0f} ms",
        f"{result.tokens:,}",
        f"{result.lines:,} ({result.dropped_lines:,})",
        result.tiktoken_passes,
    ]


def main(argv: Sequence[str] | None = None) -> None:
    args = options(__doc__, argv)
    files = django_sources()[: 60 if args.smoke else None]
    runs = 1 if args.smoke else RUNS
    size = sum(len(source.encode()) for _, source in files)
    raw = raw_tiktoken_pass([source for _, source in files])
    source_tokens = raw()
    rows = [
        _row(label, policy, files, raw, runs)
        for label, policy in (
            ("default (10000 tokens)", Policy()),
            ("none (10^9)", Policy(fold_max_tokens=10**9)),
        )
    ]
    print("## File folding: `bench/fold.py`\n")
    print(
        f"{len(files)} `.py` files of Django {django.__version__}, {size / 1e6:.1f} MB, "
        f"{source_tokens:,} tokens, in one `fold()` call; fastest of {runs} runs; "
        "(x): against one raw tiktoken pass over the sources.\n"
    )
    print(
        table(
            [
                "budget",
                "cold (parse all)",
                "warm (outlines cached)",
                "raw tiktoken pass",
                "tokens out",
                "outline lines (dropped)",
                "tiktoken passes",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
