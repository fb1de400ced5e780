"""The chain's steps other than the summary, as one run calls them: offload, selective
pruning and the two truncation fallbacks (docs/architecture.md, "Engine").

Each wraps the public step function (`offload_tool_results`, `prune_tool_blocks`,
`smart_truncate`, `hard_truncate`): it turns the step's result into the next
`ContextState`, emits the step's event and records its `StepReport`. A crashing offload or
fallback keeps the state it was given and names the failure; a crashing pruner raises
`StepFailure`, which rolls the pruning + summary transaction back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from .errors import FailureCause
from .hard_truncate import hard_truncate
from .messages import Message
from .offload import offload_tool_results
from .options import CompactOptions
from .policy import Policy
from .prune import prune_tool_blocks
from .report import RunReport
from .results import EventPhase
from .rewritten_counts import rewritten_message_tokens
from .run_state import ContextState, StepFailure
from .smart_truncate import smart_truncate

__all__ = [
    "over_hard_limit",
    "over_threshold",
    "run_fallback",
    "run_offload",
    "run_selective",
]

logger = logging.getLogger("compaction")


def over_threshold(policy: Policy, state: ContextState) -> bool:
    """True when the (scaled) context reaches the trigger threshold."""
    return policy.over_threshold(state.tokens)


def over_hard_limit(policy: Policy, state: ContextState) -> bool:
    """True when the (scaled) context is over the hard limit."""
    return policy.over_hard_limit(state.tokens)


def run_offload(
    state: ContextState, policy: Policy, options: CompactOptions, report: RunReport
) -> ContextState:
    """Move large tool results to the offload target (docs/behaviour.md#offloading); a failure keeps
    `state`."""
    if not options.offloads:
        report.step("offload", ran=False, why="no offload directory or store given")
        return state
    try:
        result = offload_tool_results(
            state.messages,
            options.offload_dir,
            min_chars=policy.offload_min_chars,
            store=options.offload_store,
        )
    except Exception as error:
        logger.exception("offload failed", extra=report.log_fields())
        report.step("offload", ran=True, why=f"failed: {error!r}", before=state.tokens)
        report.fail("offload_error")
        return state
    new = state.then(result.messages, policy.encoding)
    counts = {"offloaded_count": result.offloaded_count, "freed_chars": result.freed_chars}
    report.emit("offload_done", tokens_before=state.tokens, tokens_after=new.tokens, detail=counts)
    report.step(
        "offload",
        ran=True,
        changed=result.offloaded_count > 0,
        before=state.tokens,
        after=new.tokens,
        detail={**counts, "files": list(result.files)},  # the event stays file-free
    )
    return new if result.offloaded_count else state


def run_selective(
    state: ContextState, policy: Policy, report: RunReport
) -> tuple[ContextState, list[int] | None]:
    """The pruned state (docs/behaviour.md#selective-pruning) and, when it changed, the source index
    of each of its messages. Raises StepFailure when the pruner fails."""
    report.emit("selective_start", tokens_before=state.tokens)
    try:
        pruned = prune_tool_blocks(state.messages, policy, merge_roles=False)
    except Exception as error:
        logger.exception("selective pruning failed", extra=report.log_fields())
        report.step("selective", ran=True, why=f"failed: {error!r}", before=state.tokens)
        cause = FailureCause.raised("selective_error", error)
        raise StepFailure("selective_error", repr(error), cause) from error
    new = _pruned_state(state, pruned.messages, pruned.source_indexes, policy.encoding)
    counts = {
        "tool_blocks_kept": pruned.tool_blocks_kept,
        "tool_blocks_dropped": pruned.tool_blocks_dropped,
        "tool_calls_truncated": pruned.tool_calls_truncated,
        "tool_results_truncated": pruned.tool_results_truncated,
    }
    report.emit("selective_done", tokens_before=state.tokens, tokens_after=new.tokens, **counts)
    changed = _differs(new.messages, state.messages)
    report.step(
        "selective",
        ran=True,
        changed=changed,
        before=state.tokens,
        after=new.tokens,
        detail=counts,
    )
    return (new, pruned.source_indexes) if changed else (state, None)


def _pruned_state(
    state: ContextState, messages: list[Message], sources: Sequence[int], encoding: str
) -> ContextState:
    """The state of the pruned `messages` (`sources`: the index in `state` each comes from):
    a message pruning rewrote is counted from its source's count and the blocks that
    changed (`rewritten_message_tokens`), the others keep their counts. Without a source
    for each message, every message that is a new object is counted afresh."""
    if len(sources) != len(messages):
        return state.then(messages, encoding)
    counts = []
    for message, source in zip(messages, sources, strict=True):
        old, count = state.messages[source], state.counts[source]
        if message is not old:
            count = rewritten_message_tokens(old, count, message, encoding)
        counts.append(count)
    return ContextState(messages, counts)


def run_fallback(
    step: str, state: ContextState, needed: bool, policy: Policy, report: RunReport
) -> ContextState:
    """Run `smart_truncate` or `hard_truncate` when `needed`; a failure keeps `state`."""
    if not needed:
        why = "under the hard limit" if step == "hard_truncate" else "not needed"
        report.step(step, ran=False, why=why, before=state.tokens)
        return state
    try:
        if step == "smart_truncate":
            result = smart_truncate(state.messages, policy)
        else:
            result = hard_truncate(state.messages, policy)
    except Exception as error:
        logger.exception("%s failed", step, extra=report.log_fields())
        report.step(step, ran=True, why=f"failed: {error!r}", before=state.tokens)
        report.fail(f"{step}_error")
        return state
    new = state.then(result.messages, policy.encoding) if result.truncated else state
    phase: EventPhase = "smart_truncate_done" if step == "smart_truncate" else "hard_truncate_done"
    removed = {"removed_message_count": result.removed_message_count}
    report.emit(phase, tokens_before=state.tokens, tokens_after=new.tokens, detail=removed)
    if step == "hard_truncate" and result.truncated:
        logger.warning(
            "history truncated to the hard limit: %d -> %d messages",
            len(state.messages),
            len(new.messages),
            extra=report.log_fields(tokens_before=state.tokens, tokens_after=new.tokens),
        )
    report.step(
        step,
        ran=True,
        changed=result.truncated,
        before=state.tokens,
        after=new.tokens,
        detail={**removed, **result.detail},
    )
    return new


def _differs(new: Sequence[Message], old: Sequence[Message]) -> bool:
    """True unless `new` holds exactly the same message objects as `old`, in order."""
    return len(new) != len(old) or any(a is not b for a, b in zip(new, old, strict=True))
