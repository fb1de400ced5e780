"""SWE-agent trajectories (`*.traj`): the model's view is the `history` list.

`history` holds OpenAI-style messages (system prompt, the issue as the first user message,
assistant turns with `tool_calls` or a thought/action text, `role: "tool"` observations with
`tool_call_ids`). Demonstration messages (`is_demo`) are kept and marked meta. The instance id,
model name, exit status and cost figures go into the session's metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .blocks import mapping, short_title
from .builder import SessionBuilder
from .errors import TranscriptError
from .openai_chat import OpenAIConverter
from .registry import ImportFormat
from .types import ImportedSession

__all__ = ["IMPORT_FORMAT", "parse_swe_agent"]

FORMAT: Final = "swe_agent"


def parse_swe_agent(document: Any, name: str = "") -> ImportedSession:
    """Import a SWE-agent trajectory."""
    if not isinstance(document, Mapping) or not isinstance(document.get("history"), list):
        raise TranscriptError("a SWE-agent trajectory needs a `history` list")
    history = [_demo_as_meta(m) for m in document["history"]]
    converter = OpenAIConverter(SessionBuilder(FORMAT, source_name=name))
    converter.feed(history)
    session = converter.finish()
    config = document.get("replay_config")
    config = config if isinstance(config, Mapping) else {}
    problem = config.get("problem_statement")
    instance = problem.get("id") if isinstance(problem, Mapping) else None
    agent = mapping(config.get("agent"))
    model = mapping(agent.get("model"))
    session.external_id = str(instance or "")
    session.model = str(model.get("name") or "")
    session.title = short_title(
        str(instance or "") or name.removesuffix(".traj") or converter.first_prompt
    )
    info = mapping(document.get("info"))
    for key in ("exit_status", "model_stats"):
        if key in info:
            session.metadata[key] = info[key]
    if isinstance(info.get("submission"), str):
        session.metadata["submission_chars"] = len(info["submission"])
    if isinstance(document.get("trajectory"), list):
        session.metadata["trajectory_steps"] = len(document["trajectory"])
    return session


def _demo_as_meta(message: Any) -> Any:
    if isinstance(message, Mapping) and message.get("is_demo"):
        return {**message, "is_meta": True}
    return message


def _is_trajectory(document: Any) -> bool:
    return isinstance(document, Mapping) and (
        isinstance(document.get("history"), list)
        and ("trajectory" in document or "info" in document)
    )


def _trajectory_head_score(head: str) -> int:
    return 4 if '"history"' in head and ('"trajectory"' in head or '"info"' in head) else 0


IMPORT_FORMAT: Final = ImportFormat(
    name=FORMAT,
    label="SWE-agent",
    file_label="SWE-agent trajectory",
    aliases=("swe-agent", "traj"),
    detect=_is_trajectory,
    guess_head=_trajectory_head_score,
    read_document=parse_swe_agent,
    rank=10,  # before the message lists: a trajectory holds messages too
)
