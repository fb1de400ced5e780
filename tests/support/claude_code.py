"""The Claude Code CLI as a test client: `make claude-code` installs it from npm into .venv.

`run_claude` runs `claude -p PROMPT` offline: a throwaway HOME (its transcripts are written
under HOME/.claude/projects), no telemetry, no update check, no side traffic, talking only
to the given base URL. `require_cli` skips a test where the CLI is not installed, except
under CI, where it must run.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

__all__ = ["CLI", "VERSION", "require_cli", "run_claude"]

VERSION = "2.1.332"  # the Makefile's CLAUDE_CODE_VERSION
CLI = Path(__file__).resolve().parents[2] / f".venv/claude-code-{VERSION}/node_modules/.bin/claude"


def require_cli() -> None:
    """Skip (fail under CI) when the CLI is not installed."""
    if CLI.exists():
        return
    message = f"{CLI} is not installed (make claude-code installs it)"
    if os.environ.get("CI"):
        pytest.fail(f"the Claude Code tests must run under CI: {message}")
    pytest.skip(message)


def run_claude(
    base_url: str, api_key: str, home: Path, prompt: str, *args: str, **variables: str
) -> subprocess.CompletedProcess[str]:
    """`claude -p [ARGS] -- PROMPT` in `home`/project with `base_url` as its Anthropic API
    and `api_key` as its key (`variables`: more environment variables); the finished
    process."""
    work = home / "project"
    work.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": api_key,
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        **variables,
    }
    return subprocess.run(
        [str(CLI), "-p", *args, "--", prompt],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
