"""`manage.py seed_demo`: demo sessions for a first look (used by `make run`).

Imports the transcripts of settings.CTXWEB_SAMPLES_DIR when that folder exists, else the
built-in ones (sessions_app/demo), for the local admin user, then compacts one session twice
so compaction markers, a nested one included, show at once. It also builds a synthetic
long-running agent session (sessions_app/demo/synthetic.py) the way an agent uses ctxweb:
append in batches, compact automatically whenever the context check says so, which spreads
nested compactions along its token timeline. Running it again adds nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from compaction import ExtractiveSummarizer
from sessions_app.services.compacting.session_compaction import compact_session
from sessions_app.services.context.runtime import check
from sessions_app.services.errors import InvalidInput
from sessions_app.services.importing import import_file
from sessions_app.services.sessions.lifecycle import append_messages, create_session
from sessions_app.services.sessions.policies import default_profile

from ...demo.synthetic import TITLE, agent_rounds
from ...models import Compaction, CompactionProfile, Session
from ..cli import transcript_files

BUILT_IN: Final = Path(__file__).resolve().parents[2] / "demo"
#: Session.metadata key naming the demo file a session was loaded from.
DEMO_KEY: Final = "demo"
#: Tails kept by the two demo compactions: the second re-summarizes the first's summary.
_TAILS: Final = (12, 4)
#: DEMO_KEY value of the synthetic session, its small window (so compactions show) and size.
SYNTHETIC_KEY: Final = "synthetic:long-running-agent"
_SYNTHETIC_LIMIT: Final = 32_000
_SYNTHETIC_MESSAGES: Final = 600


class Command(BaseCommand):
    help = "Load demo sessions (shared samples or built-in ones) and compact one of them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--owner", default="admin", help="user who owns the demo sessions")
        parser.add_argument("--samples", help="folder of transcripts (default: CTXWEB_SAMPLES_DIR)")
        parser.add_argument("--no-compact", action="store_true", help="do not compact a session")

    def handle(self, *args: Any, **options: Any) -> None:
        owner = self._owner(options["owner"])
        folder, label = self._folder(options["samples"])
        loaded = 0
        for path in transcript_files([folder]):
            key = f"{label}:{path.relative_to(folder).as_posix()}"
            if Session.objects.filter(owner=owner, metadata__demo=key).exists():
                continue
            try:
                report = import_file(owner, path)
            except InvalidInput as error:
                self.stderr.write(f"{path}: not loaded: {error.first.message}")
                continue
            report.session.metadata[DEMO_KEY] = key
            report.session.save(update_fields=["metadata"])
            loaded += 1
            self.stdout.write(report.summary_line())
        self.stdout.write(
            f"demo sessions: {loaded} loaded from {folder}"
            if loaded
            else "demo sessions: already loaded"
        )
        if not options["no_compact"]:
            self._compact_one(owner)
            self._synthetic(owner)

    def _owner(self, username: str) -> Any:
        users = get_user_model()
        user = users.objects.filter(username=username).first()
        if user is None:
            user = users.objects.create_superuser(username=username, email="", password=None)
            self.stdout.write(
                f"created user {username!r} without a password: run `manage.py ensure_admin` "
                f"or `manage.py changepassword {username}` to log in"
            )
        return user

    def _folder(self, given: str | None) -> tuple[Path, str]:
        if given:
            return Path(given), "samples"
        configured = Path(getattr(settings, "CTXWEB_SAMPLES_DIR", "") or "")
        if str(configured) not in {"", "."} and configured.is_dir():
            return configured, "samples"
        return BUILT_IN, "built-in"

    def _compact_one(self, owner: Any) -> None:
        demos = Session.objects.filter(owner=owner, parent=None, metadata__has_key=DEMO_KEY)
        demos = demos.exclude(metadata__demo=SYNTHETIC_KEY)
        done = Compaction.objects.filter(session__in=demos, status=Compaction.Status.SUCCEEDED)
        if done.exclude(trigger=Compaction.Trigger.IMPORTED).exists():
            return  # already done on an earlier run
        session = demos.filter(message_count__gte=20).order_by("-context_tokens").first()
        if session is None:
            return
        for tail in _TAILS:
            profile = _demo_profile(tail)
            preview = compact_session(session, profile=profile, dry_run=True)
            if not preview.compacted:
                return  # would not help (a failed attempt would only clutter the demo)
            outcome = compact_session(session, profile=profile)
            if not outcome.compacted:
                return
            assert outcome.compaction is not None
            self.stdout.write(
                f"demo compaction #{outcome.compaction.number} of {session.title!r}: "
                f"{outcome.compaction.tokens_before} -> {outcome.compaction.tokens_after} tokens"
            )

    def _synthetic(self, owner: Any) -> None:
        """The synthetic agent session: appended round by round, auto-compacted when due."""
        if Session.objects.filter(owner=owner, metadata__demo=SYNTHETIC_KEY).exists():
            return
        session = create_session(
            owner,
            title=TITLE,
            context_limit=_SYNTHETIC_LIMIT,
            profile=default_profile(),
            model="claude-sonnet-4-5",
            metadata={DEMO_KEY: SYNTHETIC_KEY},
            system="You are a careful coding agent working in the inventory service repo.",
        )
        summarizer = ExtractiveSummarizer()  # offline and deterministic, even with an API key
        appended = 1
        for batch in agent_rounds():
            append_messages(session, batch)
            appended += len(batch)
            if check(session).should_compact:
                compact_session(session, trigger=Compaction.Trigger.AUTO, summarizer=summarizer)
            if appended >= _SYNTHETIC_MESSAGES:
                break
        made = Compaction.objects.filter(session=session, status=Compaction.Status.SUCCEEDED)
        self.stdout.write(
            f"demo session {TITLE!r}: {appended} messages, {made.count()} compactions"
        )


def _demo_profile(keep_recent: int) -> CompactionProfile:
    """The default profile, summary only, offline, keeping a tail of `keep_recent` messages."""
    profile = default_profile()
    profile.pk = None
    profile.name = f"demo-tail-{keep_recent}"
    profile.summarizer = CompactionProfile.SummarizerKind.EXTRACTIVE
    profile.keep_recent_messages = keep_recent
    profile.tail_retention_ratio = 0.001
    profile.steps = ["summary"]  # a plain summary: no pruning, no protected rounds
    return profile
