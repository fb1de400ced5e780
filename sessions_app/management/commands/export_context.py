"""`manage.py export_context SESSION --format F`: a session's context or history as a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from sessions_app.services.sessions.exporting import WHAT, export_session

from ...exporters import EXPORT_FORMATS
from ..cli import resolve_session


class Command(BaseCommand):
    help = (
        "Export a session's runtime context (what the model sees now) or its full history "
        "as an Anthropic request, an OpenAI chat request or a Markdown transcript."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "session", metavar="SESSION", help="session id (or its first characters)"
        )
        parser.add_argument("--format", required=True, choices=sorted(EXPORT_FORMATS))
        parser.add_argument("--what", choices=WHAT, default="context")
        parser.add_argument("--output", "-o", help="write to this file instead of stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        session = resolve_session(options["session"])
        export = export_session(session, options["format"], options["what"])
        if options["output"]:
            Path(options["output"]).write_text(export.body, encoding="utf-8")
            self.stderr.write(f"wrote {options['output']} ({len(export.body)} characters)")
        else:
            self.stdout.write(export.body, ending="")
