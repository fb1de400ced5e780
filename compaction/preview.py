"""Token previews: the first N tokens of a text plus a `[TRUNCATED original~N tokens]` marker."""

from __future__ import annotations

from .tokens import get_encoding

__all__ = ["token_preview", "truncation_marker"]


def truncation_marker(original_tokens: int) -> str:
    """The marker appended to a cut field (docs/behaviour.md#selective-pruning)."""
    return f"[TRUNCATED original~{original_tokens} tokens]"


def token_preview(
    text: str, keep_tokens: int, original_tokens: int, encoding: str | None = None
) -> str:
    """The first `keep_tokens` tokens of `text`, a newline and the truncation marker.

    The cut falls on a token boundary; bytes of a character split by that boundary are
    dropped, so the preview is always valid text.
    """
    enc = get_encoding(encoding)
    head_tokens = enc.encode_ordinary(text)[:keep_tokens]
    head = enc.decode_bytes(head_tokens).decode("utf-8", errors="ignore")
    marker = truncation_marker(original_tokens)
    return f"{head}\n{marker}" if head else marker
