"""Summarizers: what turns a span of messages into summary text."""

from .anthropic import AnthropicSummarizer
from .base import Summarizer, SummaryRequest
from .caller import CallerSummary
from .extractive import ExtractiveSummarizer
from .prompt import SECTIONS, SYSTEM_PROMPT, build_user_prompt, serialize_transcript
from .scripted import ScriptedSummarizer

__all__ = [
    "SECTIONS",
    "SYSTEM_PROMPT",
    "AnthropicSummarizer",
    "CallerSummary",
    "ExtractiveSummarizer",
    "ScriptedSummarizer",
    "Summarizer",
    "SummaryRequest",
    "build_user_prompt",
    "serialize_transcript",
]
