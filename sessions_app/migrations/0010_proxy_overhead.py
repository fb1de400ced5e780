"""The proxy's system prompt and tool definitions move out of `Session.proxy_state`.

`proxy_state` is rewritten on every proxied request (its message map changes); the system
prompt and tools (50-100 KB for a coding agent) change rarely, so they get their own column,
written only when they change. Their token counts and digest stay in `proxy_state`.
"""

from typing import Any

from django.db import migrations, models


def _move(apps: Any, schema_editor: Any) -> None:
    del schema_editor
    session_model = apps.get_model("sessions_app", "Session")
    for session in session_model.objects.exclude(proxy_state=None).iterator():
        state = dict(session.proxy_state or {})
        kept = {key: state.pop(key) for key in ("system", "tools") if key in state}
        if kept:
            session_model.objects.filter(pk=session.pk).update(
                proxy_state=state, proxy_overhead=kept
            )


def _back(apps: Any, schema_editor: Any) -> None:
    del schema_editor
    session_model = apps.get_model("sessions_app", "Session")
    for session in session_model.objects.exclude(proxy_overhead=None).iterator():
        state = {**(session.proxy_state or {}), **(session.proxy_overhead or {})}
        session_model.objects.filter(pk=session.pk).update(proxy_state=state)


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0009_compaction_policy_in_force")]

    operations = [
        migrations.AlterField(
            model_name="session",
            name="proxy_state",
            field=models.JSONField(
                blank=True,
                help_text="Proxy bookkeeping: message map, system and tools token counts and digest.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="session",
            name="proxy_overhead",
            field=models.JSONField(
                blank=True,
                help_text="The proxy's latest system prompt and tool definitions.",
                null=True,
            ),
        ),
        migrations.RunPython(_move, _back),
    ]
