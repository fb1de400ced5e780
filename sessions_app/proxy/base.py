"""What the proxy needs from a provider's API: the adapter interface and its value types."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = ["Accumulator", "Adapter", "Answer", "Conversation", "Provider"]

Provider = Literal["anthropic", "openai"]


@dataclass(frozen=True)
class Conversation:
    """A request body split into what the proxy reads and what it forwards untouched.

    `messages` are the conversation messages in the provider's own format (for OpenAI without
    the leading system/developer messages, which are in `lead` and count as `system`).
    """

    system: Any
    tools: Any
    messages: list[dict[str, Any]]
    model: str = ""
    metadata: Any = None
    stream: bool = False
    lead: list[dict[str, Any]] = field(default_factory=list)
    #: The client's own session id (Codex's), which names the conversation; "" when none.
    client_session: str = ""
    #: The session's title when the adapter knows it better than the first user message.
    title: str = ""
    #: The response a Responses request continues on the server (`previous_response_id`).
    previous_response: str = ""
    #: How many elements of the body's array each message is (Responses: items per turn);
    #: empty: one each.
    sizes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Answer:
    """The model's answer: as the client will send it back (`client`, for the digest) and as
    stored (`canonical`, an engine message with its real `usage`)."""

    client: dict[str, Any]
    canonical: dict[str, Any]


class Accumulator(Protocol):
    """Rebuilds the answer from the server-sent events of a streaming response."""

    def feed(self, event: str, data: str) -> None:
        """One event: its `event:` name (may be empty) and its `data:` text."""

    def answer(self) -> Answer | None:
        """The answer once the stream ended (None when it carried none)."""

    @property
    def finished(self) -> bool:
        """True once the stream's last event (`message_stop`, `[DONE]`) came."""


class Adapter(Protocol):
    """One provider's request and response shapes."""

    provider: Provider
    source_format: str

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        """Split a request body (raises ValueError when it is not a usable request)."""

    def canonical(self, messages: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
        """Each client message as the engine messages it is stored as (tool results of
        OpenAI's `role: tool` messages join one user message: the later ones map to [])."""

    def outgoing(
        self, body: Mapping[str, Any], conversation: Conversation, messages: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The body with its conversation messages replaced by `messages`."""

    def answer(self, response: Mapping[str, Any]) -> Answer | None:
        """The answer of a non-streaming response body."""

    def accumulator(self) -> Accumulator:
        """A fresh accumulator for one streaming response."""
