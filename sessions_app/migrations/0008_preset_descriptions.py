"""Preset descriptions say what each preset does, not which requirement it came from.

Only descriptions still exactly as 0002_load_presets wrote them change; one a user edited
in the admin stays theirs.
"""

from typing import Any

from django.db import migrations

OLD_TO_NEW = {
    "Seed 000: trigger at 92%, summary of the middle, 2 retries.": (
        "Trigger at 92%, summary of the middle, 2 retries."
    ),
    "Seed 001: trigger at 80%, keep 10 messages, hard-limit truncation.": (
        "Trigger at 80%, keep the newest 10 messages, hard-limit truncation."
    ),
    "Seed 004: prune old tool blocks, always summarize, 8 s cooldown.": (
        "Prune old tool blocks, always summarize, 8 s cooldown after a failure."
    ),
    "Seed 002: no LLM; fold files, thin the middle, delete from the centre.": (
        "No model: fold files, thin the middle, delete from the centre."
    ),
    "Seed 003: tool results of 100+ characters to files.": (
        "Tool results of 100+ characters offloaded to files."
    ),
}


def reword(apps: Any, schema_editor: Any) -> None:  # noqa: ARG001 (Django's signature)
    profile_model = apps.get_model("sessions_app", "CompactionProfile")
    for old, new in OLD_TO_NEW.items():
        profile_model.objects.filter(description=old).update(description=new)


def restore(apps: Any, schema_editor: Any) -> None:  # noqa: ARG001 (Django's signature)
    profile_model = apps.get_model("sessions_app", "CompactionProfile")
    for old, new in OLD_TO_NEW.items():
        profile_model.objects.filter(description=new).update(description=old)


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0007_proxy_mode")]

    operations = [migrations.RunPython(reword, restore)]
