"""Merge the duplicate sessions earlier versions stored for one conversation (issue 23): a
proxied conversation and its "(continued)" twin holding all of it again, and a watched
subagent stored twice under one parent. The earliest session keeps its id; the rule and
what is skipped are in sessions_app/services/importing/dedupe.py. Reversing does nothing (the
duplicates are not made again)."""

from typing import Any

from django.db import migrations

from sessions_app.services.importing.dedupe import DedupeModels, merge_duplicate_sessions


def merge_duplicates(apps: Any, schema_editor: Any) -> None:
    """Merge with the historical models; say how many were merged when any were."""
    report = merge_duplicate_sessions(DedupeModels.of(apps))
    if report.merged:
        print(f"\n  {report.message()}")


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0013_rate_counters")]

    operations = [migrations.RunPython(merge_duplicates, migrations.RunPython.noop)]
