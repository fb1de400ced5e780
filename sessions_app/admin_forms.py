"""The compaction profile's admin form: ratios as percentages, steps from a list, units in
every field's help text, and the engine Policy's own checks as field errors
(docs/behaviour.md#profiles); the summarizer configuration's form, whose fields a staff user
who is not a superuser sees read-only (docs/deployment.md, "Secrets")."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from compaction import STEPS, Policy, PolicyError

from .models import CompactionProfile, SummarizerConfig

#: Ratio fields (stored 0..1, edited as % of 0..100): whether 0 itself is refused.
RATIO_FIELDS: Final[dict[str, bool]] = {
    "trigger_ratio": True,
    "tail_retention_ratio": False,  # 0: a count-only tail of keep_recent_messages
    "min_recall": False,
    "middle_start": False,
    "middle_end": True,
}
#: The ratio fields' labels, which say what the percentage is of.
RATIO_LABELS: Final[dict[str, str]] = {
    "trigger_ratio": "Compact at (% of context limit)",
    "prepare_at": "Prepare ahead from (% of context limit)",
    "tail_retention_ratio": "Recent tail (% of context limit)",
    "min_recall": "Minimum recall (%)",
    "middle_start": "Truncated middle starts at (%)",
    "middle_end": "Truncated middle ends at (%)",
}

#: What each step does, as shown beside its checkbox (docs/behaviour.md).
STEP_LABELS: Final[dict[str, str]] = {
    "offload": "Offload: move long tool output to files",
    "selective": "Prune old tool output",
    "summary": "Summarize the older messages",
    "smart_truncate": "Smart truncation (no summarizer)",
    "hard_truncate": "Hard truncation to the hard limit",
}

#: Help text per field, each naming its unit.
HELP_TEXTS: Final[dict[str, str]] = {
    "name": "A short slug naming the profile (letters, digits, - and _).",
    "description": "Free text for people choosing a profile.",
    "is_default": "Used for sessions that name no profile.",
    "enabled": "Off: sessions with this profile are never compacted automatically.",
    "summarizer": "Which built-in summarizer writes the summaries, when no summarizer "
    "configuration is chosen below.",
    "summarizer_config": "A named summarizer (docs/summarizers.md). When set, it writes the "
    "summaries and the summarizer choice and summary model are unused.",
    "proxy_mode": "What the proxy does with this profile's requests; the X-Ctxweb-Mode "
    "header overrides it per request.",
    "recall_line": "Summaries end with one line naming the compacted messages' range and "
    "session, so a model using ctxweb's MCP server can read them back (README, \"Let the "
    'agent look back"). Used while the MCP server is enabled (CTXWEB_MCP_ENABLED).',
    "encoding": "Tokenizer used to count tokens (e.g. o200k_base, cl100k_base).",
    "context_limit": "Tokens: the model's context window.",
    "trigger_ratio": "% of the context limit: compaction starts when the context reaches it "
    "(92 = at 92% of the context limit).",
    "prepare_at": "% of the context limit: past it the next compaction is written in the "
    "background, and applied at once when the context reaches the compaction threshold "
    "(docs/behaviour.md#prepared-compaction). Empty: the request that reaches the threshold "
    "waits for its compaction.",
    "hard_limit": "Tokens: the context must never exceed this; the truncation fallbacks "
    "enforce it. Empty: the context limit. At least the trigger threshold.",
    "safety_factor": "Multiplier (x) applied to every token count before deciding "
    "(1 = counts as measured; 1.5 = counts taken 50% larger).",
    "cooldown_seconds": "Seconds after a failed summary during which automatic "
    "compactions are skipped (0 = no cooldown).",
    "steps": "The steps compaction may run, always in the order listed; the truncation "
    "fallbacks run only while the context is still too large. None checked: the default "
    "chain (prune, summarize, smart truncation, hard truncation).",
    "tail_retention_ratio": "% of the context limit kept verbatim as the recent tail; "
    "0 = a tail of exactly the number of recent messages below.",
    "keep_recent_messages": "Messages: the fewest newest messages always kept verbatim.",
    "summary_max_tokens": "Tokens: the longest summary asked for.",
    "summary_model": "Model name for the built-in summarizer; empty: its default model.",
    "summary_input_limit": "Tokens one summary request may carry (prompt and transcript); a "
    "larger middle is summarized in parts that are then merged. 2,000 to 10,000,000.",
    "max_summary_calls": "Requests: the most summary requests one compaction may make (each "
    "part, each merge, the recall check's second request; an attempt's retries are not "
    "counted); a middle needing more is refused (too_many_summary_calls). 1 to 10,000.",
    "max_retries": "Retries after a failed summary request (0 to 10).",
    "retry_backoff_seconds": "Seconds before the first retry, doubled for each next one "
    "(at most 60).",
    "summary_timeout_seconds": "Seconds one summary request may take (at most 600).",
    "min_recall": "% of the identifiers (paths, errors, requests) of the summarized messages "
    "the summary must keep; below it the summarizer is asked once more and the better "
    "summary is kept.",
    "tool_blocks_keep_recent": "Tool call blocks: the newest ones never pruned.",
    "tool_call_threshold": "Tokens: an older tool call's input over this is cut to a preview.",
    "tool_result_threshold": "Tokens: an older tool result over this is cut to a preview.",
    "preview_tokens": "Tokens kept as the preview of a pruned tool call or result.",
    "dialogue_rounds_keep_min": "User rounds (a user message and what follows): the newest "
    "ones kept out of the summary while pruning is in the chain.",
    "smart_truncate_max_tokens": "Tokens: smart truncation deletes whole messages from the "
    "centre until the context is under this.",
    "middle_start": "% of the context (by tokens) where smart truncation's middle starts.",
    "middle_end": "% of the context (by tokens) where smart truncation's middle ends; above "
    "the start.",
    "file_view_tools": "Tool names whose calls view a file, one per line (or separated by "
    "commas), e.g. Read; their results are folded to outlines. Names are matched exactly, "
    "case included. Empty: the engine's list (shown greyed when empty).",
    "fold_max_tokens": "Tokens: the most a file's folded outline may take.",
    "fold_merge_functions": "Show runs of function names on one line in outlines.",
    "fold_max_line_span": "Lines: a run of function names on one outline line spans at "
    "most this many source lines.",
    "fold_seed": "Integer seed of the random choice of outline lines dropped when an "
    "outline is over its token budget (same seed, same outline).",
    "offload_min_chars": "Characters: tool output longer than this is moved to a file.",
}


def percent_text(ratio: float) -> str:
    """A 0..1 ratio as a percentage of six significant digits: 0.92 -> "92", 1/6 -> "16.6667"."""
    return f"{ratio * 100:g}"


class PercentField(forms.FloatField):
    """A ratio stored 0..1, edited and shown as a percentage 0..100."""

    def __init__(self, *, open_low: bool, **kwargs: Any) -> None:
        self.open_low = open_low
        kwargs.setdefault("widget", forms.NumberInput(attrs={"step": "any", "min": 0, "max": 100}))
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> Any:
        # A bound form shows what was typed (a string); the stored value is a ratio.
        if isinstance(value, int | float) and not isinstance(value, bool):
            return percent_text(value)
        return value

    def clean(self, value: Any) -> float | None:
        percent = super().clean(value)
        if percent is None:
            return None
        low_ok = percent > 0 if self.open_low else percent >= 0
        if not (math.isfinite(percent) and low_ok and percent <= 100):
            interval = "(0, 100]" if self.open_low else "[0, 100]"
            raise ValidationError(f"Must be a percentage in {interval}.", code="range")
        return float(percent / 100)


class StepsField(forms.MultipleChoiceField):
    """The chain of steps from checkboxes, stored as a JSON list in the engine's order."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            choices=[(step, STEP_LABELS.get(step, step)) for step in STEPS],
            widget=forms.CheckboxSelectMultiple,
            required=False,
            **kwargs,
        )

    def clean(self, value: Any) -> list[str]:
        chosen = set(super().clean(value))
        return [step for step in STEPS if step in chosen]


#: A tool name: no whitespace, comma or quote; at most 128 characters.
TOOL_NAME: Final = re.compile(r"[^\s,\"']{1,128}")


class ToolNamesField(forms.CharField):
    """Tool names edited one per line (commas also separate them), stored as a JSON list.

    A JSON list typed or posted as before (`["Read", "view"]`) is read too.
    """

    def __init__(self, **kwargs: Any) -> None:
        placeholder = "\n".join(Policy().file_view_tools)  # the engine's list
        kwargs.setdefault(
            "widget",
            forms.Textarea(attrs={"rows": 4, "cols": 40, "placeholder": placeholder}),
        )
        super().__init__(required=False, strip=True, **kwargs)

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return "\n".join(str(name) for name in value)
        return value

    def clean(self, value: Any) -> list[str]:
        text = str(super().clean(value) or "")
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except ValueError:
                raise ValidationError("Not a valid list: write one tool name per line.") from None
            if not isinstance(parsed, list) or not all(isinstance(n, str) for n in parsed):
                raise ValidationError("Write one tool name per line.")
            names = [n.strip() for n in parsed]
        else:
            names = [n.strip() for n in re.split(r"[\n,]", text)]
        names = [n for n in names if n]
        bad = [n for n in names if not TOOL_NAME.fullmatch(n)]
        if bad:
            raise ValidationError(
                f"Not a tool name: {bad[0]!r} (no spaces or quotes, at most 128 characters; "
                "one name per line).",
                code="tool_name",
            )
        return list(dict.fromkeys(names))  # each name once, in the order written


class CompactionProfileForm(forms.ModelForm):  # type: ignore[type-arg]
    """A profile form whose clean() builds the engine Policy: its errors become field errors."""

    steps = StepsField(help_text=HELP_TEXTS["steps"])
    file_view_tools = ToolNamesField(
        label="File view tools", help_text=HELP_TEXTS["file_view_tools"]
    )

    class Meta:
        model = CompactionProfile
        fields = (
            "name",
            "description",
            "is_default",
            "summarizer",
            "summarizer_config",
            "proxy_mode",
            "prepare_at",
            "recall_line",
            *CompactionProfile.POLICY_FIELDS,
        )
        help_texts = HELP_TEXTS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A new profile starts from the `balanced` preset (the replaced fields lost the
        # model's defaults, and a blank required ratio is an error).
        balanced = Policy.preset("balanced") if self.instance.pk is None else None
        for name, open_low in RATIO_FIELDS.items():
            self.fields[name] = PercentField(
                open_low=open_low,
                label=RATIO_LABELS[name],
                help_text=HELP_TEXTS[name],
            )
            if balanced is not None and name not in self.initial:
                self.initial[name] = getattr(balanced, name)
        self.fields["prepare_at"] = PercentField(  # not a Policy field; empty: none ahead
            open_low=True,
            required=False,
            label=RATIO_LABELS["prepare_at"],
            help_text=HELP_TEXTS["prepare_at"],
        )
        # An empty chain means the engine's default one: show the steps that actually run.
        if not self.initial.get("steps"):
            self.initial["steps"] = list(Policy().steps)

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        self._keep_exact_ratios(cleaned)
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

    def _keep_exact_ratios(self, cleaned: dict[str, Any]) -> None:
        """An unchanged percentage keeps its exact stored ratio (1/6 is shown rounded)."""
        for name in RATIO_FIELDS:
            initial = self.initial.get(name)
            typed = self.data.get(self.add_prefix(name))
            if not isinstance(initial, float) or typed is None or name not in cleaned:
                continue
            if str(typed).strip() == percent_text(initial):
                cleaned[name] = initial


#: Summarizer configuration fields only a superuser may set: where the key is read from,
#: where the request goes, what code runs (docs/deployment.md, "Secrets").
SUPERUSER_FIELDS: Final = ("api_key_env", "base_url", "class_path")


class SummarizerConfigForm(forms.ModelForm):  # type: ignore[type-arg]
    """A summarizer configuration form; `SummarizerConfig.clean()`'s errors on fields it
    does not show (read-only for staff) are shown above it, named, instead of failing."""

    class Meta:
        model = SummarizerConfig
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

    def add_error(self, field: str | None, error: Any) -> None:
        if field is None and isinstance(error, ValidationError) and hasattr(error, "error_dict"):
            error = self._hidden_on_top(error.error_dict)
        super().add_error(field, error)

    def _hidden_on_top(self, errors: dict[str, list[ValidationError]]) -> ValidationError:
        """`errors` with those on fields not in the form as top errors naming the field."""
        kept: dict[str, list[Any]] = {}
        on_top: list[Any] = list(errors.get(NON_FIELD_ERRORS, []))
        for name, problems in errors.items():
            if name == NON_FIELD_ERRORS:
                continue
            if name in self.fields:
                kept[name] = list(problems)
            else:
                on_top += [f"{name}: {text}" for text in ValidationError(problems).messages]
        if on_top:
            kept[NON_FIELD_ERRORS] = on_top
        return ValidationError(kept)
