"""The built-in import formats, registered in the order every list shows them.

A module here declares its format (`IMPORT_FORMAT`); its line below registers it. A format
outside the package calls `registry.register` itself.
"""

from __future__ import annotations

from . import anthropic_json, claude_code, codex_format, openai_chat, openhands, swe_agent
from .registry import register

__all__: list[str] = []

for _module in (claude_code, codex_format, openai_chat, anthropic_json, swe_agent, openhands):
    register(_module.IMPORT_FORMAT)
