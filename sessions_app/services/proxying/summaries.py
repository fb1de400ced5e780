"""The summarizer provider `upstream`: a proxied session's summaries written through the
upstream and the key that serve its conversation (docs/summarizers.md#the-upstream-provider).

Inside a proxy request the proxy hands over the conversation's upstream, model and
credentials (`summaries_through`): a summary written then (the pre-call compaction, a
compaction that cannot wait) goes where the conversation goes, paid by the key that pays
for it, the server's or the caller's own. Anywhere else (a background job, the pages, the
API) no caller's key is at hand: a proxied session's summaries then use the server's
upstream key, and without one `upstream_summarizer` answers None (the profile's other
configuration writes them). The credentials live in memory for the request only: never in
the database, a job's parameters or a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

from compaction import (
    AnthropicSummarizer,
    ExtractiveSummarizer,
    OpenAISummarizer,
    Summarizer,
    SummaryError,
    SummaryRequest,
)
from sessions_app.models import Session
from sessions_app.services.proxying.upstream import (
    UpstreamProvider,
    server_credentials,
    upstream_base,
)

__all__ = [
    "ConversationUpstream",
    "conversation_summarizer",
    "summaries_through",
    "upstream_summarizer",
]

logger = logging.getLogger("sessions_app")

#: The key sent when there is none (an upstream that needs no key): the SDKs insist on one,
#: and a placeholder keeps them from reading another from the environment.
_NO_KEY: Final = "no-key"
#: The upstream of each proxied format (a session's `proxy_state["provider"]`): the
#: Responses API's sessions are OpenAI's, summarized through its Chat Completions.
_PROVIDERS: Final[dict[str, UpstreamProvider]] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "responses": "openai",
}


@dataclass(frozen=True)
class ConversationUpstream:
    """Where a conversation goes and with which credential headers (`x-api-key`,
    `authorization`: as the proxy sends them upstream), and the model it talks to."""

    provider: UpstreamProvider
    model: str
    credentials: Mapping[str, str] = field(default_factory=dict, repr=False)


_serving: ContextVar[ConversationUpstream | None] = ContextVar(
    "ctxweb_conversation_upstream", default=None
)


@contextmanager
def summaries_through(upstream: ConversationUpstream) -> Iterator[None]:
    """Within the block (one proxy request), summaries of the `upstream` provider are
    written through `upstream`; afterwards its credentials are forgotten."""
    token = _serving.set(upstream)
    try:
        yield
    finally:
        _serving.reset(token)


def upstream_summarizer(
    session: Session | None, *, model: str, max_tokens: int | None, timeout: float
) -> Summarizer | None:
    """The summarizer writing through the conversation's upstream, with `model` (empty:
    the conversation's own); None when there is none to use: not in a proxy request and
    not a proxied session, no server key outside a request, or no model to ask."""
    through = _serving.get() or _served_by_server(session)
    if through is None or not (model or through.model):
        return None
    chosen = model or through.model
    if through.provider == "anthropic":
        client = _anthropic_client(through.credentials, timeout)
        return AnthropicSummarizer(chosen, max_tokens=max_tokens, timeout=timeout, client=client)
    client = _openai_client(through.credentials, timeout)
    return OpenAISummarizer(chosen, max_tokens=max_tokens, timeout=timeout, client=client)


def conversation_summarizer(
    session: Session | None, *, model: str, max_tokens: int | None, timeout: float
) -> Summarizer | None:
    """The profile choice `auto` for a proxied session: `upstream_summarizer`, with the
    extractive summary written instead once it fails (docs/summarizers.md#without-a-
    configuration); None where no upstream can write it."""
    try:
        through = upstream_summarizer(session, model=model, max_tokens=max_tokens, timeout=timeout)
    except Exception:  # the provider's SDK not installed, a client it refuses...
        logger.warning("the conversation's upstream cannot write summaries", exc_info=True)
        return None
    return None if through is None else OrExtractive(through)


class OrExtractive:
    """`first`; from its first failure on (an error answer, a refusal, a login token the
    upstream accepts for the agent only), the extractive summary: a summary the default
    asked for never fails a compaction that the extractive one can write."""

    def __init__(self, first: Summarizer) -> None:
        self.first = first
        self.failed = False
        self._extractive = ExtractiveSummarizer()

    @property
    def name(self) -> str:
        return self._extractive.name if self.failed else str(self.first.name)

    @property
    def model(self) -> str:
        return "" if self.failed else str(getattr(self.first, "model", "") or "")

    def summarize(self, request: SummaryRequest) -> str:
        if not self.failed:
            try:
                return self.first.summarize(request)
            except SummaryError as error:
                self.failed = True
                logger.warning(
                    "the conversation's upstream did not write the summary; extractive instead",
                    extra={"reason": error.reason, "status": error.status},
                )
        return self._extractive.summarize(request)


def _served_by_server(session: Session | None) -> ConversationUpstream | None:
    """Outside a proxy request: a proxied session's upstream with the server's key."""
    if session is None or not session.proxy_key:
        return None
    named = (session.proxy_state or {}).get("provider") or session.source_format
    provider = _PROVIDERS.get(str(named))
    if provider is None:
        return None
    credentials = server_credentials(provider)
    if not credentials:
        return None
    return ConversationUpstream(provider, session.model, credentials)


def _bearer(credentials: Mapping[str, str]) -> str | None:
    scheme, _, token = str(credentials.get("authorization", "")).strip().partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def _anthropic_client(credentials: Mapping[str, str], timeout: float) -> Any:
    """An Anthropic SDK client for the upstream with exactly these credentials: the
    `x-api-key` as its key, a Bearer token (an OAuth login) as its auth token."""
    import anthropic  # the `anthropic` extra, imported where used

    key = str(credentials.get("x-api-key", "")).strip() or None
    token = _bearer(credentials)
    return anthropic.Anthropic(
        api_key=key or (None if token else _NO_KEY),
        auth_token=token,
        base_url=upstream_base("anthropic"),
        timeout=timeout,
        max_retries=0,
    )


def _openai_client(credentials: Mapping[str, str], timeout: float) -> Any:
    """An OpenAI SDK client for the upstream's Chat Completions with the Bearer key."""
    import openai  # the `openai` extra, imported where used

    return openai.OpenAI(
        api_key=_bearer(credentials) or _NO_KEY,
        base_url=f"{upstream_base('openai')}/v1",
        timeout=timeout,
        max_retries=0,
    )
