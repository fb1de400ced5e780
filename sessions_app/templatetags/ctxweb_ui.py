"""Template helpers for the pages: token and percent formats, relative times, usage bars.

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

from sessions_app.viewmodels.timeline import short_tokens

register = template.Library()

BAR_WIDTH = 120
BAR_HEIGHT = 8


@register.filter
def tokens(value: Any) -> str:
    """A token count in short form: 950, 12.3k, 2.1M."""
    try:
        return short_tokens(float(value))
    except (TypeError, ValueError):
        return ""


@register.filter
def percent(value: Any, digits: int = 0) -> str:
    """0.8123 -> '81%'."""
    try:
        return f"{float(value) * 100:.{int(digits)}f}%"
    except (TypeError, ValueError):
        return ""


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
def usage_bar(tokens: int, limit: int, threshold_ratio: float) -> SafeString:
    """A small SVG bar: runtime tokens against the limit, with the threshold marked."""
    usage = tokens / limit if limit else 0.0
    fill = round(min(1.0, usage) * BAR_WIDTH, 1)
    mark = round(min(1.0, threshold_ratio) * BAR_WIDTH, 1)
    level = "over" if usage >= 1 else "hot" if usage >= threshold_ratio else "ok"
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
