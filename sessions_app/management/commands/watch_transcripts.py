"""`manage.py watch_transcripts [PATH ...]`: follow local agent transcripts as they grow."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessions_app.services.importing.watching import (
    DEFAULT_ROOTS,
    SETTLE_SECONDS,
    Watcher,
    default_roots,
)

from ..cli import resolve_user


class Command(BaseCommand):
    help = (
        "Follow Claude Code project folders and Codex session folders (default: "
        + " and ".join(DEFAULT_ROOTS)
        + ", when they exist): new transcripts become sessions, lines appended to known "
        "ones are added to their session (only the new bytes are read), the agents' own "
        "compactions become compaction points and subagent transcripts attach to their parent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="*", metavar="PATH", help="folders or files to follow")
        parser.add_argument("--owner", default="admin", help="the user who owns the sessions")
        parser.add_argument(
            "--interval", type=float, default=2.0, help="seconds between scans (default 2)"
        )
        parser.add_argument(
            "--settle",
            type=float,
            default=SETTLE_SECONDS,
            help="seconds a session file holding only sidechain lines must stay unmodified "
            f"before it is stored without its main thread (default {SETTLE_SECONDS:g})",
        )
        parser.add_argument("--once", action="store_true", help="scan once and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        user = resolve_user(options["owner"])
        roots = [Path(p).expanduser() for p in options["paths"]] or default_roots()
        if not roots:
            raise CommandError(f"nothing to watch: none of {', '.join(DEFAULT_ROOTS)} exists")
        if options["interval"] <= 0:
            raise CommandError("--interval must be a positive number of seconds")
        if options["settle"] < 0:
            raise CommandError("--settle must be zero or a positive number of seconds")
        watcher = Watcher(user, roots, settle=options["settle"])
        self.stdout.write(f"watching {', '.join(str(r) for r in roots)} for {user}")
        while True:
            for result in watcher.scan(held=True):
                if result.held:
                    self.stdout.write(
                        f"{result.path}: already held, nothing new -> {result.session_id}"
                    )
                    continue
                self.stdout.write(
                    f"{result.path}: +{result.added} messages, {result.updated} updated, "
                    f"+{result.compactions} compactions -> {result.session_id}"
                    + (" (read again from the start)" if result.reread else "")
                )
            if options["once"]:
                return
            try:
                time.sleep(options["interval"])
            except KeyboardInterrupt:
                return
