"""The Django admin: profiles (validated as engine policies), sessions, compactions, API keys."""

from __future__ import annotations

import json
import os
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html

from compaction import PolicyError

from .models import ApiKey, Compaction, CompactionJob, CompactionProfile, Session, SummarizerConfig
from .services.archives import ArchiveUnavailable, read_archive

#: Fields that are ratios in (0, 1].
RATIO_FIELDS = ("trigger_ratio", "middle_end")
#: Ratios that may also be 0. tail_retention_ratio 0: a count-only tail, exactly
#: keep_recent_messages messages (the auto-compression preset).
ZERO_RATIO_FIELDS = ("tail_retention_ratio", "min_recall", "middle_start")


class CompactionProfileForm(forms.ModelForm):  # type: ignore[type-arg]
    """A profile form whose clean() builds the engine Policy: its errors become field errors."""

    class Meta:
        model = CompactionProfile
        fields = (
            "name",
            "description",
            "is_default",
            "summarizer",
            "summarizer_config",
            "proxy_mode",
            *CompactionProfile.POLICY_FIELDS,
        )

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        for name in RATIO_FIELDS:
            value = cleaned.get(name)
            if value is not None and not 0 < value <= 1:
                self.add_error(name, "Must be a ratio in (0, 1].")
        for name in ZERO_RATIO_FIELDS:
            value = cleaned.get(name)
            if value is not None and not 0 <= value <= 1:
                self.add_error(name, "Must be a ratio in [0, 1].")
        if self.errors:
            return cleaned
        candidate = CompactionProfile(
            **{
                name: cleaned.get(name, getattr(self.instance, name))
                for name in ("name", *CompactionProfile.POLICY_FIELDS)
            }
        )
        try:
            candidate.to_policy()
        except PolicyError as error:
            message = str(error).split(": ", 1)[-1]
            field = error.field if error.field in self.fields else None
            self.add_error(field, message)
        except (TypeError, ValueError) as error:
            self.add_error(None, str(error))
        return cleaned


@admin.register(CompactionProfile)
class CompactionProfileAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = CompactionProfileForm
    list_display = (
        "name",
        "is_default",
        "enabled",
        "summarizer",
        "context_limit",
        "trigger_ratio",
        "hard_limit",
        "keep_recent_messages",
        "updated_at",
    )
    list_editable = ("enabled",)
    search_fields = ("name", "description")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "description",
                    "is_default",
                    "enabled",
                    "summarizer",
                    "summarizer_config",
                    "proxy_mode",
                )
            },
        ),
        (
            "Trigger",
            {
                "fields": (
                    "encoding",
                    "context_limit",
                    "trigger_ratio",
                    "hard_limit",
                    "safety_factor",
                    "steps",
                )
            },
        ),
        (
            "Partition and summary",
            {
                "fields": (
                    "tail_retention_ratio",
                    "keep_recent_messages",
                    "summary_max_tokens",
                    "summary_model",
                    "max_retries",
                    "retry_backoff_seconds",
                    "summary_timeout_seconds",
                    "summary_input_limit",
                    "min_recall",
                )
            },
        ),
        (
            "Selective pruning and cooldown",
            {
                "fields": (
                    "tool_blocks_keep_recent",
                    "tool_call_threshold",
                    "tool_result_threshold",
                    "preview_tokens",
                    "dialogue_rounds_keep_min",
                    "cooldown_seconds",
                )
            },
        ),
        (
            "Folding and smart truncation, offload",
            {
                "fields": (
                    "fold_max_tokens",
                    "fold_merge_functions",
                    "fold_max_line_span",
                    "fold_seed",
                    "smart_truncate_max_tokens",
                    "middle_start",
                    "middle_end",
                    "file_view_tools",
                    "offload_min_chars",
                )
            },
        ),
    )


@admin.register(SummarizerConfig)
class SummarizerConfigAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Named summarizers (docs/summarizers.md); SummarizerConfig.clean() refuses what cannot
    work, each problem on its field."""

    list_display = ("name", "provider", "model", "base_url", "api_key_env", "used_by", "updated_at")
    list_filter = ("provider",)
    search_fields = ("name", "description", "model")
    fields = (
        "name",
        "description",
        "provider",
        "model",
        "base_url",
        "api_key_env",
        "max_tokens",
        "timeout_seconds",
        "class_path",
    )

    @admin.display(description="Profiles")
    def used_by(self, obj: SummarizerConfig) -> str:
        return ", ".join(obj.profiles.values_list("name", flat=True)) or "-"

    def save_model(
        self, request: HttpRequest, obj: SummarizerConfig, form: Any, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        # A warning, not a refusal: the workers that compact may have an environment of
        # their own; each compaction reads the variable when it runs.
        if obj.api_key_env and not os.environ.get(obj.api_key_env):
            self.message_user(
                request,
                f"{obj.api_key_env} is not set in this server's environment: compactions "
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
