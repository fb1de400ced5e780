"""The Claude Code CLI as a test client: `make claude-code` installs it from npm into .venv,
two versions (the pinned newest, `VERSION`, and an older 2.1.x), each in its own folder.

`run_claude` runs `claude -p PROMPT` offline: a throwaway HOME (its transcripts are written
under HOME/.claude/projects), no telemetry, no update check, no side traffic, talking only
to the given base URL. `require_cli` skips a test where the CLI is not installed, except
under CI, where it must run.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

__all__ = ["CLI", "OLDER_VERSION", "VERSION", "VERSIONS", "cli", "require_cli", "run_claude"]

VERSION = "2.1.332"  # the Makefile's CLAUDE_CODE_VERSION
OLDER_VERSION = "2.1.328"  # the Makefile's CLAUDE_CODE_OLDER_VERSION
VERSIONS = (VERSION, OLDER_VERSION)
_VENV = Path(__file__).resolve().parents[2] / ".venv"


def cli(version: str = VERSION) -> Path:
    """The `claude` executable of `version`, where `make claude-code` installs it."""
    return _VENV / f"claude-code-{version}/node_modules/.bin/claude"


CLI = cli()


def require_cli(version: str = VERSION) -> None:
    """Skip (fail under CI) when the CLI of `version` is not installed."""
    if cli(version).exists():
        return
    message = f"{cli(version)} is not installed (make claude-code installs it)"
    if os.environ.get("CI"):
        pytest.fail(f"the Claude Code tests must run under CI: {message}")
    pytest.skip(message)


def run_claude(
    base_url: str,
    api_key: str,
    home: Path,
    prompt: str,
    *args: str,
    version: str = VERSION,
    timeout: float = 120,
    environment: Mapping[str, str] | None = None,
    **variables: str,
) -> subprocess.CompletedProcess[str]:
    """`claude -p [ARGS] -- PROMPT` of `version` in `home`/project with `base_url` as its
    Anthropic API and `api_key` as its key (`environment` and `variables`: more environment
    variables); the finished process (killed after `timeout` seconds)."""
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
        **(environment or {}),
        **variables,
    }
    return subprocess.run(
        [str(cli(version)), "-p", *args, "--", prompt],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
