"""The Codex CLI as a test client: `make codex` installs it from npm into .venv/codex-<version>.

`write_config` writes a throwaway CODEX_HOME's config.toml for one of the two ways Codex is
pointed at a server (the README's "Point an agent at the proxy"): a custom provider
(`base_url`, `env_key`, `wire_api = "responses"`, extra headers from the environment) or the
built-in provider redirected by `openai_base_url` with its key in `CODEX_API_KEY`.
`compact_at` sets `model_auto_compact_token_limit` (and a small `model_context_window`), so a
reply whose usage passes it makes Codex compact: a custom provider with a plain `/responses`
call (`tools: []` and the checkpoint prompt), the built-in one with a trailing
`compaction_trigger` item.

`run_codex` runs `codex exec` offline: that CODEX_HOME (its rollouts are written under
CODEX_HOME/sessions), no analytics, feedback, OpenTelemetry or update check, no retries,
stdin closed, killed after a timeout. `require_cli` skips a test where the CLI is not
installed, except under CI, where it must run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import pytest

__all__ = [
    "CLI",
    "VERSION",
    "VERSIONS",
    "cli",
    "require_cli",
    "rollouts",
    "run_codex",
    "session_id",
    "write_config",
]

VERSION = "0.171.0"  # the Makefile's CODEX_VERSION
VERSIONS = (VERSION,)
MODEL = "gpt-5.2-codex"
#: The custom provider's key variable, and the one its `X-Ctxweb-Key` header is read from.
KEY_VARIABLE = "CODEX_TEST_KEY"
CTXWEB_KEY_VARIABLE = "CTXWEB_KEY"
_VENV = Path(__file__).resolve().parents[2] / ".venv"
Provider = Literal["custom", "builtin"]


def cli(version: str = VERSION) -> Path:
    """The `codex` executable of `version`, where `make codex` installs it."""
    return _VENV / f"codex-{version}/node_modules/.bin/codex"


CLI = cli()


def require_cli(version: str = VERSION) -> None:
    """Skip (fail under CI) when the CLI of `version` is not installed."""
    if cli(version).exists():
        return
    message = f"{cli(version)} is not installed (make codex installs it)"
    if os.environ.get("CI"):
        pytest.fail(f"the Codex CLI tests must run under CI: {message}")
    pytest.skip(message)


def write_config(
    home: Path,
    base_url: str,
    provider: Provider = "custom",
    *,
    compact_at: int | None = None,
    ctxweb_header: bool = False,
    headers: Mapping[str, str] | None = None,
) -> Path:
    """`home`/config.toml sending Codex's requests to `base_url` (ending in `/v1`) through
    the `provider` setup; `ctxweb_header`: the custom provider also sends `X-Ctxweb-Key`
    from `$CTXWEB_KEY`, and `headers` as they are. Returns the file."""
    home.mkdir(parents=True, exist_ok=True)
    lines = [f'model = "{MODEL}"', "check_for_update_on_startup = false"]
    if compact_at is not None:
        lines += [
            f"model_context_window = {compact_at * 4}",
            f"model_auto_compact_token_limit = {compact_at}",
        ]
    if provider == "builtin":
        lines.append(f'openai_base_url = "{base_url}"')
    else:
        lines.append('model_provider = "ctxweb"')
    lines += ["", "[analytics]", "enabled = false", "", "[feedback]", "enabled = false"]
    lines += ["", "[otel]", 'exporter = "none"', "", "[history]", 'persistence = "none"']
    if provider == "custom":
        lines += _custom_provider(base_url, ctxweb_header, headers or {})
    path = home / "config.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _custom_provider(base_url: str, ctxweb_header: bool, headers: Mapping[str, str]) -> list[str]:
    lines = [
        "",
        "[model_providers.ctxweb]",
        'name = "ctxweb"',
        f'base_url = "{base_url}"',
        f'env_key = "{KEY_VARIABLE}"',
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "stream_idle_timeout_ms = 20000",
    ]
    if ctxweb_header:
        lines.append(f'env_http_headers = {{ "X-Ctxweb-Key" = "{CTXWEB_KEY_VARIABLE}" }}')
    if headers:
        pairs = ", ".join(
            f"{json.dumps(name)} = {json.dumps(value)}" for name, value in headers.items()
        )
        lines.append(f"http_headers = {{ {pairs} }}")
    return lines


def run_codex(
    home: Path,
    prompt: str,
    api_key: str,
    *,
    version: str = VERSION,
    timeout: float = 60,
    environment: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`codex exec PROMPT` of `version` with `home` as HOME and CODEX_HOME (its config from
    `write_config`) in `home`/project, `api_key` as both setups' key; `environment`: more
    variables (`CTXWEB_KEY` for the header). The finished process (killed after `timeout`
    seconds)."""
    work = home / "project"
    work.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(home),
        KEY_VARIABLE: api_key,
        "CODEX_API_KEY": api_key,
        "NO_COLOR": "1",
        **(environment or {}),
    }
    command = [str(cli(version)), "exec", "--skip-git-repo-check"]
    command += ["--dangerously-bypass-approvals-and-sandbox", prompt]
    return subprocess.run(
        command,
        env=env,
        cwd=work,
        stdin=subprocess.DEVNULL,  # else it waits for more input on a pipe
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def session_id(done: subprocess.CompletedProcess[str]) -> str:
    """The session id a finished `codex exec` printed (its header on stderr)."""
    found = re.search(r"^session id: (\S+)$", done.stderr, re.MULTILINE)
    if found is None:
        raise AssertionError(f"no session id in Codex's output:\n{done.stderr}")
    return found.group(1)


def rollouts(home: Path) -> list[Path]:
    """The rollout files Codex wrote under `home`/sessions, oldest first."""
    return sorted((home / "sessions").glob("*/*/*/rollout-*.jsonl"))
