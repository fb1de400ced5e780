"""Load the engine's presets (compaction.policy.PRESETS) as CompactionProfile rows."""

from typing import Any

from django.db import migrations

from compaction import PRESETS, Policy

DESCRIPTIONS = {
    "balanced": "Default: selective pruning, summary, then smart and hard truncation.",
    "context-compact": "Seed 000: trigger at 92%, summary of the middle, 2 retries.",
    "auto-compression": "Seed 001: trigger at 80%, keep 10 messages, hard-limit truncation.",
    "selective": "Seed 004: prune old tool blocks, always summarize, 8 s cooldown.",
    "smart-truncation": "Seed 002: no LLM; fold files, thin the middle, delete from the centre.",
    "offload": "Seed 003: tool results of 100+ characters to files.",
}


def load_presets(apps: Any, schema_editor: Any) -> None:
    profile_model = apps.get_model("sessions_app", "CompactionProfile")
    field_names = {field.name for field in profile_model._meta.get_fields()}
    for name in PRESETS:
        values = Policy.preset(name).to_dict()
        values.pop("name")
        if values.get("summary_model") is None:
            values["summary_model"] = ""
        known = {key: value for key, value in values.items() if key in field_names}
        profile_model.objects.update_or_create(
            name=name,
            defaults={
                **known,
                "description": DESCRIPTIONS.get(name, ""),
                "is_default": name == "balanced",
            },
        )


def unload_presets(apps: Any, schema_editor: Any) -> None:
    profile_model = apps.get_model("sessions_app", "CompactionProfile")
    profile_model.objects.filter(name__in=list(PRESETS)).delete()


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0001_initial")]

    operations = [migrations.RunPython(load_presets, unload_presets)]
