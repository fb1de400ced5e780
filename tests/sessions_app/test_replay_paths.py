"""One conversation is one session whatever path it comes by (issue 23): every sample
transcript (tests/fixtures/samples, copies of ../shared/samples) is stored (a) by one import,
(b) by the watcher reading it written in k = 2..8 pieces cut anywhere (mid-line included),
a scan after each (a branch the file's history abandoned after a scan saw it stays in the
session that gave the file up, docs/behaviour.md "the file restarted", and is not compared;
the JSON-lines samples only: the watcher reads `.jsonl` files, Claude
Code's and Codex's; a SWE-agent `.traj` or an OpenHands `.json` is one JSON document,
imported whole, never watched), and (c) by the proxy, replayed request by request as its
client sent it with the variations a client makes (string content vs one text block,
`cache_control` moved, key order, the system prompt as a string or a list, null and false
fields added to the answers sent back, a request sent twice). The set of sessions, their
parent links (the tool call that started a subagent) and each session's messages in
canonical form (tests/support/replay.py) must be identical.

(c) compares what a proxy can be told (tests/support/proxy_replay.py): a leading system
message is a request's system prompt, never stored, so it is left out of both sides; a
history not ending with an assistant message gets one last request whose answer (`END`)
is left out of the proxy's side. Claude Code transcripts go as Anthropic Messages requests
(subagents as their own request streams under the same Claude Code session id), the others
as OpenAI Chat requests (each stored message converted alone by the app's exporter), where
thinking, a tool result's `is_error` and an answer's several text blocks cannot be said and
are left out of both sides.
Hypothesis picks the cuts and the variations; few examples, so the module stays fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from sessions_app.models import ApiKey, Session
from tests.support.asgi_server import AsgiServer
from tests.support.fake_streaming import StreamingAnthropic, StreamingOpenAI
from tests.support.proxy_replay import ProxyTarget, Variations, comparable, replay
from tests.support.replay import (
    Sessions,
    describe,
    import_once,
    new_owner,
    watch_in_chunks,
    watchable,
)

pytestmark = pytest.mark.django_db(transaction=True)

SAMPLES: Final = Path(__file__).resolve().parent.parent / "fixtures" / "samples"
#: Each sample and the API its client speaks.
TRANSCRIPTS: Final = {
    "agentsessions_claude_small.coverage.jsonl": "anthropic",
    "cclog_dag_compact_after_rewind.synthetic.jsonl": "anthropic",
    "claude-code-worktrees-session/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl": "anthropic",
    "agentsessions_codex_small.coverage.jsonl": "openai",
    "basic_gui_mode.json": "openai",
    "marshmallow-1867_function_calling.traj": "openai",
}
_FEW: Final = examples(
    max_examples=2,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failing replay is slow
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_imported: dict[str, Sessions] = {}


def _imported_once(name: str) -> Sessions:
    """(a), once per transcript (a value: it outlives the test's database)."""
    if name not in _imported:
        _imported[name] = import_once(SAMPLES / name)
    return _imported[name]


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[AsgiServer, StreamingAnthropic, StreamingOpenAI]]:
    """ctxweb under uvicorn and the fake upstreams, for the whole module."""
    with AsgiServer() as proxy, StreamingAnthropic() as anthropic, StreamingOpenAI() as openai:
        yield proxy, anthropic, openai


@pytest.fixture
def target(servers: Any, settings: Any) -> ProxyTarget:
    """Where a replay goes; the proxy forwards to the fake upstreams with the server's keys."""
    proxy, anthropic, openai = servers
    settings.CTXWEB_UPSTREAM_ANTHROPIC_URL = anthropic.base_url
    settings.CTXWEB_UPSTREAM_ANTHROPIC_API_KEY = "sk-ant-server-key"
    settings.CTXWEB_UPSTREAM_OPENAI_URL = openai.base_url.removesuffix("/v1")
    settings.CTXWEB_UPSTREAM_OPENAI_API_KEY = "sk-openai-server-key"
    return ProxyTarget(url=proxy.url, key="", anthropic=anthropic, openai=openai)


@pytest.fixture(autouse=True)
def database_not_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test starts with the proxy's database pause of another (proxy/outage.py)."""
    from sessions_app.proxy import outage

    monkeypatch.setattr(outage, "_paused_until", 0.0)


@pytest.mark.parametrize("name", [name for name in TRANSCRIPTS if watchable(SAMPLES / name)])
@_FEW
@given(data=st.data())
def test_watching_pieces_stores_what_one_import_stores(
    name: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = SAMPLES / name
    size = path.stat().st_size
    cuts = data.draw(st.lists(st.integers(1, size - 1), min_size=1, max_size=7, unique=True))
    folder = tmp_path_factory.mktemp("watched") / "transcripts"
    owner = new_owner()
    watch_in_chunks(path, sorted(cuts), folder, owner)
    # A history rewound after a scan leaves the branch it abandoned in the session that
    # gave the file up (docs/behaviour.md, "the file restarted"): not this conversation.
    Session.objects.filter(owner=owner, metadata__has_key="file_restarted").delete()
    assert describe(owner) == _imported_once(name)


_VARIATIONS: Final = st.builds(
    Variations,
    blocks=st.booleans(),
    cache_moves=st.booleans(),
    reversed_keys=st.booleans(),
    system_list=st.booleans(),
    defaults=st.booleans(),
    retried=st.none() | st.integers(0, 12),
)


@pytest.mark.parametrize("name", TRANSCRIPTS)
@_FEW
@given(how=_VARIATIONS)
def test_the_proxy_replay_stores_what_one_import_stores(
    name: str, how: Variations, target: ProxyTarget
) -> None:
    owner = new_owner()
    _, target.key = ApiKey.issue(owner, "replay")
    target.sent = 0
    provider: Any = TRANSCRIPTS[name]
    replay(_imported_once(name), target, provider, how)
    assert comparable(describe(owner), provider) == comparable(_imported_once(name), provider)
