"""The Django admin: profiles (validated as engine policies), sessions, compactions, API keys."""

from __future__ import annotations

import json
import os
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html

from sessions_app.services.compacting.archives import ArchiveUnavailable, read_archive

from .admin_forms import (
    SUPERUSER_FIELDS,
    CompactionProfileForm,
    SummarizerConfigForm,
    percent_text,
)
from .models import ApiKey, Compaction, CompactionJob, CompactionProfile, Session, SummarizerConfig
from .summarizer_config import key_env_allowed


@admin.register(CompactionProfile)
class CompactionProfileAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Profiles in sections named for what they do; ratios as percentages
    (sessions_app/admin_forms.py)."""

    form = CompactionProfileForm
    list_display = (
        "name",
        "is_default",
        "enabled",
        "summarizer",
        "context_limit",
        "trigger_percent",
        "hard_limit",
        "keep_recent_messages",
        "updated_at",
    )
    list_editable = ("enabled",)
    search_fields = ("name", "description")

    def get_changelist_form(self, request: HttpRequest, **kwargs: Any) -> Any:
        """The list's form, each row's `enabled` checkbox labelled with its profile (a form
        field needs a name a screen reader can say: axe-core, tests/browser/test_axe.py)."""
        base = super().get_changelist_form(request, **kwargs)

        class LabelledRow(base):  # type: ignore[valid-type, misc]
            def __init__(self, *args: Any, **row: Any) -> None:
                super().__init__(*args, **row)
                if "enabled" in self.fields:
                    label = f"Enabled: {self.instance.name}"
                    self.fields["enabled"].widget.attrs["aria-label"] = label

        return LabelledRow

    fieldsets = (
        ("Profile", {"fields": ("name", "description", "is_default", "enabled")}),
        (
            "When to compact",
            {
                "fields": (
                    "context_limit",
                    "trigger_ratio",
                    "prepare_at",
                    "hard_limit",
                    "encoding",
                    "safety_factor",
                    "cooldown_seconds",
                )
            },
        ),
        ("Steps", {"fields": ("steps",)}),
        ("What to keep", {"fields": ("tail_retention_ratio", "keep_recent_messages")}),
        (
            "Summary",
            {
                "fields": (
                    "summarizer",
                    "summarizer_config",
                    "summary_model",
                    "summary_max_tokens",
                    "summary_input_limit",
                    "max_summary_calls",
                    "max_retries",
                    "retry_backoff_seconds",
                    "summary_timeout_seconds",
                    "min_recall",
                )
            },
        ),
        (
            "Pruning old tool output",
            {
                "fields": (
                    "tool_blocks_keep_recent",
                    "tool_call_threshold",
                    "tool_result_threshold",
                    "preview_tokens",
                    "dialogue_rounds_keep_min",
                )
            },
        ),
        (
            "Truncation fallbacks",
            {
                "fields": (
                    "smart_truncate_max_tokens",
                    "middle_start",
                    "middle_end",
                    "file_view_tools",
                    "fold_max_tokens",
                    "fold_merge_functions",
                    "fold_max_line_span",
                    "fold_seed",
                )
            },
        ),
        ("Offloading", {"fields": ("offload_min_chars",)}),
        ("Proxy", {"fields": ("proxy_mode",)}),
        ("MCP server", {"fields": ("recall_line",)}),
    )

    @admin.display(description="Trigger", ordering="trigger_ratio")
    def trigger_percent(self, obj: CompactionProfile) -> str:
        """The trigger as a percentage of the context limit: "92%"."""
        return f"{percent_text(obj.trigger_ratio)}%"


@admin.register(SummarizerConfig)
class SummarizerConfigAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Named summarizers (docs/summarizers.md); SummarizerConfig.clean() refuses what cannot
    work, each problem on its field. The key's variable, the base URL and the class path
    are a superuser's to set: read-only for other staff (docs/deployment.md, "Secrets")."""

    form = SummarizerConfigForm
    list_display = ("name", "provider", "model", "base_url", "api_key_env", "used_by", "updated_at")
    list_filter = ("provider",)
    search_fields = ("name", "description", "model")
    fields = SummarizerConfigForm.Meta.fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        readonly = tuple(super().get_readonly_fields(request, obj))
        superuser = getattr(request.user, "is_superuser", False)
        return readonly if superuser else (*readonly, *SUPERUSER_FIELDS)

    @admin.display(description="Profiles")
    def used_by(self, obj: SummarizerConfig) -> str:
        return ", ".join(obj.profiles.values_list("name", flat=True)) or "-"

    def save_model(
        self, request: HttpRequest, obj: SummarizerConfig, form: Any, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        # A warning, not a refusal: the workers that compact may have an environment of
        # their own; each compaction reads the variable when it runs. Only for a variable
        # meant for summary keys (clean() refuses others): it tells nothing of the rest.
        name = obj.api_key_env
        if name and key_env_allowed(name) and not os.environ.get(name):
            self.message_user(
                request,
                f"{name} is not set in this server's environment: compactions "
                f"with {obj.name!r} fail until it is set where they run.",
                level=messages.WARNING,
            )


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = (
        "__str__",
        "owner",
        "source_format",
        "message_count",
        "history_tokens",
        "context_tokens",
        "compaction_count",
        "profile",
        "updated_at",
    )
    list_filter = ("source_format", "profile")
    search_fields = ("title", "external_id", "id")
    raw_id_fields = ("owner", "parent")
    readonly_fields = (
        "id",
        "version",
        "context_revision",
        "next_seq",
        "next_position",
        "message_count",
        "history_tokens",
        "context_tokens",
        "context_entry_count",
        "compaction_count",
        "last_usage",
        "cooldown_until",
        "compaction_failures",
        "created_at",
        "updated_at",
    )


@admin.register(Compaction)
class CompactionAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Compactions are a log: read-only, with the archived originals shown escaped."""

    list_display = (
        "__str__",
        "status",
        "trigger",
        "summarizer",
        "tokens_before",
        "tokens_after",
        "first_seq",
        "last_seq",
        "created_at",
    )
    list_filter = ("status", "trigger", "summarizer")
    search_fields = ("session__title", "session__id", "summary")
    readonly_fields = ("archived_originals",)
    exclude = ("archive",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        names = [f.name for f in Compaction._meta.fields if f.name != "archive"]
        return [*names, "archived_originals"]

    @admin.display(description="Archived originals")
    def archived_originals(self, obj: Compaction) -> str:
        """The archive document, pretty-printed and HTML-escaped in a <pre>."""
        if not obj.archive:
            return "(no archive)"
        try:
            document = read_archive(obj).to_dict()
        except ArchiveUnavailable as error:
            return f"(archive unreadable: {error})"
        text = json.dumps(document, ensure_ascii=False, indent=2)
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', text)


@admin.register(CompactionJob)
class CompactionJobAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("id", "session", "status", "phase", "attempts", "created_at", "finished_at")
    list_filter = ("status",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """API keys: the plain key is shown once after creation; afterwards only its prefix."""

    list_display = ("key_prefix", "name", "user", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "lookup", "user__username")
    raw_id_fields = ("user",)
    actions = ("revoke",)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if obj is None:
            return ("user", "name")
        return ("key_prefix", "user", "name", "created_at", "last_used_at", "revoked_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return []
        return ["key_prefix", "user", "created_at", "last_used_at", "revoked_at"]

    @admin.display(description="Key")
    def key_prefix(self, obj: ApiKey) -> str:
        return f"{ApiKey.PREFIX}{obj.lookup}…"

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        key = None if change else obj.set_key()
        super().save_model(request, obj, form, change)
        if key is not None:
            self.message_user(
                request,
                f"New API key (shown only now, copy it): {key}",
                level=messages.WARNING,
            )

    @admin.action(description="Revoke the selected API keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} API key(s).", level=messages.SUCCESS)
