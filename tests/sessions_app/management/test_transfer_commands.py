"""The import_transcript, compact, export_context and seed_demo management commands."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from sessions_app.demo.synthetic import TITLE
from sessions_app.management.commands.seed_demo import SYNTHETIC_KEY
from sessions_app.models import Compaction, Session
from tests.sessions_app import samples
from tests.sessions_app.samples import EXPECTED, WORKTREES

pytestmark = pytest.mark.django_db


@pytest.fixture
def samples_dir() -> Path:
    return samples.samples_dir()


def run(*args: str, **options: Any) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def test_import_a_folder_of_transcripts(user: Any, samples_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    shutil.copytree(samples_dir, folder)
    (folder / "notes.json").write_text('{"not": "a transcript"}')
    out, err = run("import_transcript", str(folder), owner=user.username)
    lines = out.splitlines()
    assert lines[-1] == f"imported {len(EXPECTED)} of {len(EXPECTED) + 1} files, 1 failed"
    assert "notes.json: not imported: could not recognise" in err
    summary = next(line for line in lines if line.startswith("ef958aa1"))
    assert summary.startswith(
        "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl: claude_code, 37 messages, 40 tool calls, "
        "0 compactions, 6 subagent sessions, 0 lines skipped, 73 kept raw -> "
    )
    assert Session.objects.filter(owner=user, parent=None).count() == len(EXPECTED)
    assert Session.objects.filter(owner=user).count() == len(EXPECTED) + 7  # 6 + 1 subagents


def test_import_reports_skipped_lines_and_options(user: Any, tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}, "junk"]))
    out, _ = run("import_transcript", str(path), owner=user.username, format="openai", title="Chat")
    assert "1 lines skipped" in out
    assert "  skipped line 2: messages[1] is not an object" in out
    assert Session.objects.get(owner=user).title == "Chat"


def test_import_shows_progress_on_request(user: Any, samples_dir: Path) -> None:
    _, err = run(
        "import_transcript", str(samples_dir / WORKTREES), owner=user.username, progress=True
    )
    assert "pass 2" in err
    assert "store" in err
    assert "100%" in err
    _, quiet = run("import_transcript", str(samples_dir / WORKTREES), owner=user.username)
    assert quiet == ""  # stderr is not a terminal here


def test_import_errors(user: Any, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no user 'nobody'"):
        run("import_transcript", str(tmp_path), owner="nobody")
    with pytest.raises(CommandError, match="no such file"):
        run("import_transcript", str(tmp_path / "missing.jsonl"), owner=user.username)
    with pytest.raises(CommandError, match="no transcript files"):
        run("import_transcript", str(tmp_path), owner=user.username)
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    with pytest.raises(CommandError, match="nothing was imported"):
        run("import_transcript", str(bad), owner=user.username)


def _import(user: Any, path: Path) -> Session:
    run("import_transcript", str(path), owner=user.username)
    return Session.objects.filter(owner=user, parent=None).latest("created_at")


def test_compact_and_dry_run(user: Any, samples_dir: Path) -> None:
    session = _import(user, samples_dir / "marshmallow-1867_function_calling.traj")
    session.context_limit = 4000
    session.save(update_fields=["context_limit"])
    preview, _ = run("compact", str(session.pk)[:8], dry_run=True)
    assert preview.startswith("dry run: ")
    assert "nothing stored" in preview
    assert not Compaction.objects.filter(session=session).exists()
    out, _ = run("compact", str(session.pk), profile="balanced")
    assert out.startswith(f"compaction #1 of {session.pk}: ")
    assert Compaction.objects.get(session=session).trigger == "manual"


def test_compact_errors(user: Any) -> None:
    with pytest.raises(CommandError, match="no session"):
        run("compact", "00000000-0000-0000-0000-000000000000")
    with pytest.raises(CommandError, match="at least 4"):
        run("compact", "ab")
    session = Session.objects.create(owner=user, title="empty")
    with pytest.raises(CommandError, match=r"^profile: unknown profile 'nope'"):
        run("compact", str(session.pk), profile="nope")
    out, _ = run("compact", str(session.pk))
    assert out.startswith("not compacted: ")


def test_export_context(user: Any, samples_dir: Path, tmp_path: Path) -> None:
    session = _import(user, samples_dir / "cclog_dag_compact_after_rewind.synthetic.jsonl")
    out, _ = run("export_context", str(session.pk), format="anthropic")
    body = json.loads(out)
    # The summary and the two messages after it; the summary and the user message that
    # follows it go out as one user message, so roles alternate.
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert body["messages"][0]["content"][-1] == {"type": "text", "text": "After compaction"}
    history, _ = run("export_context", str(session.pk), format="openai", what="history")
    assert len(json.loads(history)["messages"]) == 8
    target = tmp_path / "out.md"
    _, err = run("export_context", str(session.pk), format="markdown", output=str(target))
    assert target.read_text().startswith("# Start")
    assert err.startswith(f"wrote {target}")


def test_seed_demo_loads_samples_once_and_nests_a_compaction(
    settings: Any, samples_dir: Path
) -> None:
    settings.CTXWEB_SAMPLES_DIR = samples_dir
    out, _ = run("seed_demo")
    admin = get_user_model().objects.get(username="admin")
    assert not admin.has_usable_password()
    assert f"demo sessions: {len(EXPECTED)} loaded" in out
    roots = Session.objects.filter(owner=admin, parent=None).exclude(metadata__demo=SYNTHETIC_KEY)
    assert roots.count() == len(EXPECTED)
    made = Compaction.objects.filter(session__in=roots).exclude(trigger="imported")
    first, second = made.order_by("number")
    assert first.session_id == second.session_id
    assert first.parent_id == second.pk  # a nested, two-level marker
    again, _ = run("seed_demo")
    assert "already loaded" in again
    assert Session.objects.filter(owner=admin, parent=None).count() == len(EXPECTED) + 1
    assert made.count() == 2


def test_seed_demo_falls_back_to_built_in_transcripts(settings: Any, tmp_path: Path) -> None:
    settings.CTXWEB_SAMPLES_DIR = tmp_path / "absent"
    get_user_model().objects.create_superuser("admin", "", "pw-123456-admin")
    out, _ = run("seed_demo")
    assert "demo sessions: 2 loaded" in out
    assert Session.objects.filter(source_format="claude_code").exists()
    made = Compaction.objects.exclude(trigger="imported").exclude(
        session__metadata__demo=SYNTHETIC_KEY
    )
    made = made.order_by("number")
    assert [c.parent_id for c in made] == [made[1].pk, None]
    assert get_user_model().objects.get(username="admin").has_usable_password()


def test_seed_demo_builds_a_long_auto_compacted_session_once(settings: Any, tmp_path: Path) -> None:
    settings.CTXWEB_SAMPLES_DIR = tmp_path / "absent"
    out, _ = run("seed_demo")
    session = Session.objects.get(metadata__demo=SYNTHETIC_KEY)
    assert session.title == TITLE
    assert session.context_limit == 32_000
    assert 400 <= session.message_count <= 800
    assert f"demo session {TITLE!r}: {session.message_count} messages" in out
    made = list(Compaction.objects.filter(session=session).order_by("number"))
    assert len(made) >= 3
    assert {c.trigger for c in made} == {"auto"}
    assert {c.status for c in made} == {"succeeded"}
    assert len({(c.first_seq, c.last_seq) for c in made}) == len(made)  # spread out
    assert any(c.parent_id is not None for c in made)  # a later one re-summarized an earlier
    assert all(c.tokens_after < c.tokens_before for c in made)  # visible drops
    assert session.context_tokens < session.context_limit
    messages = session.messages.count()
    run("seed_demo")
    assert Session.objects.filter(title=TITLE).count() == 1
    assert Compaction.objects.filter(session=session).count() == len(made)
    assert session.messages.count() == messages
