"""`manage.py import_transcript PATH...`: import agent transcripts (files or folders)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessions_app.services.errors import InvalidInput
from sessions_app.services.importing import import_file

from ...importers import format_names
from ..cli import ProgressBar, resolve_user, transcript_files


class Command(BaseCommand):
    help = (
        "Import agent transcripts: Claude Code, Codex CLI, OpenAI chat, Anthropic, SWE-agent "
        "or OpenHands files, or folders of them (a Claude Code project folder imports all its "
        "sessions, each with its subagents). The format is detected unless --format is given."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH", help="transcript files or folders")
        parser.add_argument(
            "--format", choices=format_names(), help="the format (default: detected)"
        )
        parser.add_argument("--owner", default="admin", help="the user who owns the sessions")
        parser.add_argument("--title", help="title of the imported session (default: its own)")
        parser.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="show a progress bar on stderr (default: when stderr is a terminal)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = resolve_user(options["owner"])
        files = list(transcript_files(options["paths"]))
        if not files:
            raise CommandError("no transcript files found")
        bar = ProgressBar(cast(TextIO, self.stderr._out), enabled=options["progress"])
        imported = failed = 0
        for number, path in enumerate(files, start=1):
            bar.start(f"[{number}/{len(files)}] {path.name}")
            try:
                report = import_file(
                    user,
                    path,
                    format=options["format"],
                    title=options["title"],
                    progress=bar.update,
                )
            except InvalidInput as error:
                bar.clear()
                self.stderr.write(f"{path}: not imported: {error.first.message}")
                failed += 1
                continue
            bar.clear()
            imported += 1
            self.stdout.write(report.summary_line())
            for skipped in report.skipped[:5]:
                self.stdout.write(f"  skipped {skipped}")
            if report.skipped_count > 5:
                self.stdout.write(f"  ... and {report.skipped_count - 5} more skipped lines")
        self.stdout.write(
            f"imported {imported} of {len(files)} files" + (f", {failed} failed" if failed else "")
        )
        if failed and not imported:
            raise CommandError("nothing was imported")
