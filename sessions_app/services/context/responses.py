"""The OpenAI Responses form of the context response (`?format=responses`).

`{"system": …, "messages": [items…]}` without its closing brace, as the OpenAI form's body
(services/context/openai.py; the tail, services/context/text.py, adds `tokens`, `limit`
and `usage`): the items as exporters/responses.py renders the entries. Rebuilt on every
change (it never extends: `open_tail` False), since items do not map one to one onto entries.
"""

from __future__ import annotations

import json

from django.core.serializers.json import DjangoJSONEncoder

from sessions_app.exporters import to_responses
from sessions_app.models import Session
from sessions_app.services.context.openai import OpenAIBody, system_text
from sessions_app.services.sessions.entries import entry_message, load_entries

__all__ = ["responses_body"]


def responses_body(session: Session) -> OpenAIBody:
    """The Responses body of all the entries of `session`."""
    entries = load_entries(session)
    messages = [entry_message(entry) for entry in entries]
    head = 0
    while head < len(messages) and messages[head].get("role") == "system":
        head += 1
    payload = {"system": system_text(messages[:head]), "messages": to_responses(messages)["input"]}
    return OpenAIBody(
        body=json.dumps(payload, cls=DjangoJSONEncoder)[:-1].encode(),
        tokens=sum(entry.token_count for entry in entries),
        last_position=entries[-1].position if entries else -1,
        open_tail=False,
        last_role="",
        asks_tools=False,
    )
