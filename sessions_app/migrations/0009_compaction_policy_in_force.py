"""Compaction records keep the limits in force when they ran (issue 15, "Truth on the page").

Rows written before this migration get them back from the policy their details recorded
(`details["policy"]`, written by every engine compaction); imported compactions and rows
without a recorded policy keep None.
"""

from typing import Any

from django.db import migrations, models


def _in_force(policy: Any) -> dict[str, int] | None:
    if not isinstance(policy, dict):
        return None
    try:
        limit = int(policy["context_limit"])
        ratio = float(policy["trigger_ratio"])
        hard = policy.get("hard_limit")
        return {
            "context_limit": limit,
            "threshold_tokens": int(limit * ratio),
            "hard_limit": int(hard) if hard is not None else limit,
        }
    except (KeyError, TypeError, ValueError):
        return None


def fill_from_details(apps: Any, schema_editor: Any) -> None:
    Compaction = apps.get_model("sessions_app", "Compaction")
    for row in Compaction.objects.filter(context_limit__isnull=True).iterator():
        values = _in_force((row.details or {}).get("policy"))
        if values:
            Compaction.objects.filter(pk=row.pk).update(**values)


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0008_preset_descriptions"),
    ]

    operations = [
        migrations.AddField(
            model_name="compaction",
            name="context_limit",
            field=models.PositiveIntegerField(
                blank=True, help_text="Tokens: the context limit in force when it ran.", null=True
            ),
        ),
        migrations.AddField(
            model_name="compaction",
            name="hard_limit",
            field=models.PositiveIntegerField(
                blank=True, help_text="Tokens: the hard limit in force when it ran.", null=True
            ),
        ),
        migrations.AddField(
            model_name="compaction",
            name="threshold_tokens",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Tokens: the compaction threshold in force when it ran.",
                null=True,
            ),
        ),
        migrations.RunPython(fill_from_details, migrations.RunPython.noop),
    ]
