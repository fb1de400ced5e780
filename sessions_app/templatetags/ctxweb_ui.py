"""Template helpers for the pages: token, percent and count formats, relative times, usage bars.

Bars are SVG drawn from numbers (attributes, not inline styles: the CSP forbids those).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince

from sessions_app.models import Compaction
from sessions_app.viewmodels.offloads import OffloadView, offload_view
from sessions_app.viewmodels.timeline import short_tokens

register = template.Library()

BAR_WIDTH = 120
BAR_HEIGHT = 8


@register.filter
def offload(compaction: Compaction) -> OffloadView | None:
    """The files an offload (or a chain's offload step) wrote, for the compaction log."""
    return offload_view(compaction)


@register.filter
def tokens(value: Any) -> str:
    """A token count in short form: 950, 12.3k, 2.1M."""
    try:
        return short_tokens(float(value))
    except (TypeError, ValueError):
        return ""


MINUS = "\u2212"


def _number(value: float, digits: int) -> str:
    """`value` with `digits` decimals, a true minus sign, and never a negative zero."""
    text = f"{value:.{digits}f}"
    if text.startswith("-"):
        text = text[1:] if float(text) == 0 else MINUS + text[1:]
    return text


@register.filter
def percent(value: Any, digits: int = 0) -> str:
    """0.8123 -> '81%' (a tiny negative is '0%', never '-0%')."""
    try:
        return f"{_number(float(value) * 100, int(digits))}%"
    except (TypeError, ValueError):
        return ""


@register.filter
def change(before: Any, after: Any) -> str:
    """The signed change from `before` to `after`, in percent: '-34%', '+118%', '±0%'.

    The sign is a true minus (U+2212). A change that rounds to zero but is not one keeps a
    decimal ('-0.4%'), so a saving is never shown as '-0%'. Empty when `before` is not a
    positive number.
    """
    try:
        first, last = float(before), float(after)
    except (TypeError, ValueError):
        return ""
    if first <= 0:
        return ""
    ratio = (last - first) / first * 100
    if ratio == 0:
        return "\u00b10%"
    digits = 0 if abs(ratio) >= 0.5 else 1
    text = _number(abs(ratio), digits)
    if float(text) == 0:
        text = "0.1"  # under 0.05%: still a change, shown at the smallest step
    return f"{'+' if ratio > 0 else MINUS}{text}%"


@register.filter
def token_change(before: Any, after: Any) -> str:
    """The signed change in tokens from `before` to `after`: '\u2212450', '+1.2k', '±0'.

    A fall (a saving) takes a true minus (U+2212), a growth a plus: the sign follows the
    direction, never a fixed minus before a difference. Empty when either is not a number.
    """
    try:
        first, last = float(before), float(after)
    except (TypeError, ValueError):
        return ""
    if last == first:
        return "\u00b10"
    return f"{'+' if last > first else MINUS}{short_tokens(abs(last - first))}"


@register.filter
def change_class(before: Any, after: Any) -> str:
    """The CSS class of a change from `before` to `after`: 'growth' when it grew, else
    'saving' (an unchanged figure is drawn as no saving, not as a growth)."""
    try:
        return "growth" if float(after) > float(before) else "saving"
    except (TypeError, ValueError):
        return ""


@register.filter
def counted(value: Any, noun: str) -> str:
    """A count with its noun, singular for one: '1 message', '3 messages'.

    `noun` is 'message' (plural with s) or 'entry,entries' (singular,plural).
    """
    singular, _, plural = noun.partition(",")
    try:
        count = int(value)
    except (TypeError, ValueError):
        return ""
    return f"{count} {singular if count == 1 else plural or singular + 's'}"


@register.filter
def percent_of(value: Any, total: Any) -> str:
    """`value` as a percentage of `total`, one decimal: '7.8%'."""
    try:
        return f"{float(value) / float(total) * 100:.1f}%"
    except (TypeError, ValueError, ZeroDivisionError):
        return ""


@register.filter
def ago(value: datetime | None) -> str:
    """'3 hours ago', or 'just now' under a minute."""
    if value is None:
        return ""
    if (timezone.now() - value).total_seconds() < 60:
        return "just now"
    return f"{timesince(value).split(',')[0]} ago"


@register.simple_tag
def usage_bar(tokens: int, limit: int, threshold_ratio: float, over_threshold: bool) -> SafeString:
    """A small SVG bar: runtime tokens against the limit, with the threshold marked; hot when
    `over_threshold`, the engine's answer (services/sessions/threshold.py)."""
    usage = tokens / limit if limit else 0.0
    fill = round(min(1.0, usage) * BAR_WIDTH, 1)
    mark = round(min(1.0, threshold_ratio) * BAR_WIDTH, 1)
    level = "over" if usage >= 1 else "hot" if over_threshold else "ok"
    label = f"{usage * 100:.0f}% of {short_tokens(limit)} (threshold {threshold_ratio * 100:.0f}%)"
    return format_html(
        '<svg class="usage-bar usage-{}" viewBox="0 0 {} {}" width="{}" height="{}" role="img" '
        'aria-label="{}"><title>{}</title>'
        '<rect class="usage-track" x="0" y="0" width="{}" height="{}" rx="2"></rect>'
        '<rect class="usage-fill" x="0" y="0" width="{}" height="{}" rx="2"></rect>'
        '<line class="usage-threshold" x1="{}" x2="{}" y1="-1" y2="{}"></line></svg>',
        level,
        BAR_WIDTH,
        BAR_HEIGHT,
        BAR_WIDTH,
        BAR_HEIGHT,
        label,
        label,
        BAR_WIDTH,
        BAR_HEIGHT,
        fill,
        BAR_HEIGHT,
        mark,
        mark,
        BAR_HEIGHT + 1,
    )
