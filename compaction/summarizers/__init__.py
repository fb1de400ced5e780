"""Summarizers: what turns a span of messages into summary text.

The API summarizers import their SDK only when one is created (the `anthropic` and
`openai` extras), so importing this package needs neither.
"""

from .anthropic import AnthropicSummarizer
from .base import Summarizer, SummaryRequest
from .caller import CallerSummary
from .extractive import ExtractiveSummarizer
from .openai import OpenAISummarizer
from .prompt import SECTIONS, SYSTEM_PROMPT, build_user_prompt, serialize_transcript
from .scripted import ScriptedSummarizer

__all__ = [
    "SECTIONS",
    "SYSTEM_PROMPT",
    "AnthropicSummarizer",
    "CallerSummary",
    "ExtractiveSummarizer",
    "OpenAISummarizer",
    "ScriptedSummarizer",
    "Summarizer",
    "SummaryRequest",
    "build_user_prompt",
    "serialize_transcript",
]
