"""Which client messages a proxied session stored, kept in a state of constant size.

A client sends its whole history with every request. The proxy must tell whether a request
continues a stored session (the stored client messages are a prefix of the request's)
without loading or re-digesting the stored history. Each session keeps, under
`proxy_state["map"]`:

- `count`: how many client messages it stored (its answers included);
- two running fingerprints: `base`, the chain of the normalized digests of the messages
  before the window (sessions_app/proxy/digests.py `digest`: blind to moved cache
  breakpoints and SDK nulls), and in the window, for each position `p`, `raws[p]`: the
  chain of the raw digests (hashes of the bytes the client sent) of the first `p`
  messages ("" when unknown: an answer the client has not sent back yet);
- the window: the normalized digests of the last WINDOW messages (`digests`), the aliases
  of a retried answer (`aliases`), and which client message was the last answer
  (`answered`);
- `shifts`: at which client index each stored message starts (run-length encoded: OpenAI's
  tool results join one stored message);
- `form`: the canonical form its normalized digests are of (sessions_app/canonical.py
  `FORM`; a map stored before has none: form 1, `legacy_digest`). Such a map is compared
  with the request's digests of its form, and re-digested in the current form from the
  request's messages the first time a request extends it (they are equal in the old form):
  nothing stored before changes meaning.

A request continues the session when the raw chain of its first `p` messages equals the
stored one for some `p` of the window (its first `p` messages are byte-identical to the
stored ones) and the rest up to `count` have the stored normalized digests: a client that
sends its history as before costs one hash per message and a few digests. A client that
re-serialized an older message is compared on the chain of all normalized digests (the
slow path, as costly as digesting the whole request).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sessions_app.canonical import FORM

__all__ = ["ROOT", "WINDOW", "Incoming", "PrefixMap", "chain"]

#: Positions whose digests are kept (a client re-serializes its last few messages only).
WINDOW: Final = 16
#: The chain of no message.
ROOT: Final = "-"


def chain(start: str, digests: Sequence[str]) -> str:
    """The running fingerprint `start` extended by each digest in turn."""
    value = start
    for one in digests:
        value = hashlib.blake2b(f"{value}{one}".encode(), digest_size=8).hexdigest()
    return value


class Incoming:
    """A request's messages: normalized digests on demand, raw chains computed once."""

    def __init__(self, digests: Sequence[str]) -> None:
        self.digests = digests
        self._raw: list[str] | None = None

    def digests_of(self, form: int) -> Sequence[str]:
        """The normalized digests of canonical form `form` (`FORM`, or 1: `.legacy` of
        proxy/digests.py `Digests`; the current ones when there are no others)."""
        if form == FORM:
            return self.digests
        legacy = getattr(self.digests, "legacy", None)
        return legacy if legacy is not None else self.digests

    def __len__(self) -> int:
        return len(self.digests)

    def raw_chain(self, position: int) -> str:
        """The chain of the raw digests of the first `position` messages."""
        if self._raw is None:
            self._raw = self._chains()
        return self._raw[position] if position < len(self._raw) else ""

    def _chains(self) -> list[str]:
        """The raw chains, as the body's reading made them (sessions_app/proxy/digests.py
        `RawDigests`) or from the raw digests; [ROOT] alone when there are none."""
        known = list(getattr(self.digests, "chains", ()))
        if len(known) == len(self.digests) + 1:
            return known
        raws = list(getattr(self.digests, "raw", []))
        if len(raws) != len(self.digests):
            raws = []
        chains, value = [ROOT], ROOT
        for one in raws:
            value = chain(value, [one])
            chains.append(value)
        return chains


@dataclass
class PrefixMap:
    """A session's stored client messages (see the module's docstring)."""

    count: int = 0
    start: int = 0
    base: str = ROOT
    digests: list[str] = field(default_factory=list)
    raws: list[str] = field(default_factory=lambda: [ROOT])
    aliases: dict[str, list[str]] = field(default_factory=dict)
    answered: int | None = None
    #: [[stored index, client index], ...]: stored message k starts at client index
    #: i + (k - k0) for the last shift (k0, i) with k0 <= k.
    shifts: list[list[int]] = field(default_factory=list)
    #: Messages stored (the engine's count, >= `count` when client messages were split).
    stored: int = 0
    #: The canonical form of `base`, `digests` and `aliases` (1: stored before it existed).
    form: int = FORM

    @classmethod
    def of(cls, state: Mapping[str, Any] | None) -> PrefixMap:
        """The map kept in a `proxy_state` (converted from the first format: full lists)."""
        state = state or {}
        kept = state.get("map")
        if isinstance(kept, Mapping):
            return cls(
                count=int(kept["count"]),
                start=int(kept["start"]),
                base=str(kept["base"]),
                digests=list(kept["digests"]),
                raws=list(kept["raws"]),
                aliases={str(k): list(v) for k, v in (kept.get("aliases") or {}).items()},
                answered=kept.get("answered"),
                shifts=[list(s) for s in kept.get("shifts") or []],
                stored=int(kept.get("stored") or 0),
                form=int(kept.get("form") or 1),
            )
        if "digests" in state:
            return cls._legacy(state)
        return cls()

    @classmethod
    def _legacy(cls, state: Mapping[str, Any]) -> PrefixMap:
        digests = list(state.get("digests") or [])
        starts = list(state.get("starts") or [])
        start = max(0, len(digests) - WINDOW)
        legacy = cls(
            count=len(digests),
            start=start,
            base=chain(ROOT, digests[:start]),
            digests=digests[start:],
            raws=[""] * (len(digests) - start + 1),  # the old raw digests were made otherwise
            aliases={k: list(v) for k, v in (state.get("aliases") or {}).items()},
            answered=state.get("answered"),
            form=1,
        )
        legacy.add_starts(starts)
        return legacy

    def to_state(self) -> dict[str, Any]:
        """The JSON kept under `proxy_state["map"]`."""
        return {
            "count": self.count,
            "start": self.start,
            "base": self.base,
            "digests": self.digests,
            "raws": self.raws,
            "aliases": self.aliases,
            "answered": self.answered,
            "shifts": self.shifts,
            "stored": self.stored,
            "form": self.form,
        }

    def continued_by(self, incoming: Incoming, upto: int | None = None) -> bool:
        """True when the first `upto` (default: all) stored messages start `incoming`."""
        upto = self.count if upto is None else upto
        if upto > len(incoming) or upto < self.start:
            return False
        matched = None
        for position in range(upto, self.start - 1, -1):
            kept = self.raws[position - self.start]
            if kept and kept == incoming.raw_chain(position):
                matched = position
                break
        digests = incoming.digests_of(self.form)
        if matched is None:  # re-serialized before the window: compare all normalized
            before = [digests[i] for i in range(self.start)]
            if chain(ROOT, before) != self.base:
                return False
            matched = self.start
        for index in range(matched, upto):
            theirs, mine = digests[index], self.digests[index - self.start]
            if theirs != mine and not self._aliased(index, incoming, theirs):
                return False
        return True

    def _aliased(self, index: int, incoming: Incoming, theirs: str) -> bool:
        """The message at `index` is another answer of a retried request (aliases of an
        older map may be of either form: an answer recorded after it was read)."""
        aliases = self.aliases.get(str(index), ())
        return theirs in aliases or (self.form != FORM and incoming.digests[index] in aliases)

    def extend(self, incoming: Incoming) -> None:
        """Take the request's messages beyond `count` (it continues the map) and its raw
        chains: the next request is compared with this one's bytes."""
        total = len(incoming)
        if self.form != FORM:
            self._redigest(incoming)
        self.digests += [incoming.digests[i] for i in range(self.count, total)]
        self.raws = [incoming.raw_chain(p) for p in range(self.start, total + 1)]
        self.count = total
        self._trim()

    def _redigest(self, incoming: Incoming) -> None:
        """The map in the current form, from the request's messages that continue it."""
        current = incoming.digests
        self.base = chain(ROOT, [current[i] for i in range(self.start)])
        self.digests = [current[i] for i in range(self.start, self.count)]
        self.aliases = {}
        self.form = FORM

    def add_answer(self, digest: str) -> None:
        """The model's answer, stored after the request's messages (its bytes unknown)."""
        self.answered = self.count
        self.digests.append(digest)
        self.raws.append("")
        self.add_starts([self.count])
        self.count += 1
        self._trim()

    def add_alias(self, index: int, digest: str) -> None:
        """Another answer to a retried request stands for the stored answer at `index`."""
        if self.start <= index < self.count and digest != self.digests[index - self.start]:
            kept = self.aliases.get(str(index), [])
            self.aliases[str(index)] = [*kept, digest][-8:]

    def add_starts(self, starts: Sequence[int]) -> None:
        """The client index each newly stored message starts at."""
        for client in starts:
            last = self.shifts[-1] if self.shifts else None
            if last is None or client != last[1] + (self.stored - last[0]):
                self.shifts.append([self.stored, client])
            self.stored += 1

    def start_of(self, stored: int) -> int | None:
        """The client index stored message `stored` (0: the first one) starts at."""
        if not 0 <= stored < self.stored or not self.shifts:
            return None
        at = bisect.bisect_right([s[0] for s in self.shifts], stored) - 1
        first, client = self.shifts[at]
        return client + (stored - first)

    def _trim(self) -> None:
        start = max(self.start, self.count - WINDOW)
        if start == self.start:
            return
        cut = start - self.start
        self.base = chain(self.base, self.digests[:cut])
        self.digests = self.digests[cut:]
        self.raws = self.raws[cut:]
        self.aliases = {k: v for k, v in self.aliases.items() if int(k) >= start}
        self.start = start
