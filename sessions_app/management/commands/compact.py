"""`manage.py compact SESSION`: compact a stored session's runtime context now.

The command-line face of sessions_app/services/compacting/session_compaction.py (the same run as the
web page's "Compact now" and `POST /api/sessions/{id}/compactions`); the stateless
`POST /api/compact` is sessions_app/api/stateless_compact.py.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.errors import ServiceError

from ..cli import resolve_session


class Command(BaseCommand):
    help = "Compact a session's runtime context now (a manual compaction), or preview it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "session", metavar="SESSION", help="session id (or its first characters)"
        )
        parser.add_argument("--profile", help="compaction profile name (default: the session's)")
        parser.add_argument("--instructions", help="extra instructions for the summary")
        parser.add_argument(
            "--dry-run", action="store_true", help="show what would change; store nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        session = resolve_session(options["session"])
        try:
            outcome = compact_session(
                session,
                profile=options["profile"],
                instructions=options["instructions"],
                dry_run=options["dry_run"],
            )
        except ServiceError as error:
            # An InvalidInput's text names each field ("profile: unknown profile 'x'...").
            raise CommandError(str(error)) from error
        result = outcome.result
        stats = result.stats if result is not None else None
        if outcome.dry_run:
            if not outcome.compacted or stats is None:
                self.stdout.write(f"dry run: nothing would change ({outcome.reason})")
                return
            self.stdout.write(
                f"dry run: {stats.original_token_count} -> {stats.compacted_token_count} tokens, "
                f"{stats.compacted_message_count} messages would be compacted; nothing stored"
            )
            return
        if outcome.failed:
            raise CommandError(f"compaction failed: {outcome.reason}; the context is unchanged")
        compaction = outcome.compaction
        if compaction is None:
            self.stdout.write(f"not compacted: {outcome.reason}")
            return
        self.stdout.write(
            f"compaction #{compaction.number} of {session.pk}: {compaction.tokens_before} -> "
            f"{compaction.tokens_after} tokens, {compaction.compacted_message_count} entries "
            f"compacted ({compaction.strategy})"
        )
