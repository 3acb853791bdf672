"""What an episode's transcript says about outcomes the agent saw, or never saw.

An *unobserved outcome*: the agent issued a mutating call, got back something that does not
say whether the mutation happened (a transport error: reset, timeout, lost response; or a
5xx), and then stopped without ever learning more. It learns more by

- repeating the same call (same tool, same arguments, an idempotency key aside) and
  getting a definite answer (any status below 500: a 2xx, a replay, a 409 conflict), or
- making any later read-only call that gets a definite answer (a get/list/head through the
  proxy), or a call to a tool that resumes a half-done record (`resumingHint`: it changes
  nothing on a finished one and answers with the record). We cannot tell *what* a read
  verified, so any successful read counts: the rate is a lower bound on blind give-ups,
  never inflated by verification we failed to credit.

Read-only-ness comes from the episode's own wire log (the proxy classifies each request by
route); for a tool the wire never saw, the domain catalogue decides.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from undobench_gym.core.catalog import domain as load_domain
from undobench_gym.core.schema import EpisodeRecord
from undobench_gym.evaluation.errors import Unsupported
from undobench_gym.evaluation.records import EpisodeLike, as_episode

Episode = EpisodeRecord


def _definite(obs: dict[str, Any]) -> bool:
    if isinstance(obs.get("error"), dict) and obs["error"].get("type") == "transport":
        return False
    status = obs.get("status")
    return isinstance(status, int) and status < 500


@cache
def _catalog_read_only(domain: str) -> dict[str, bool]:
    try:
        return {name: t.read_only for name, t in load_domain(domain).tools.items()}
    except Exception:  # an unknown or broken domain: classify from the wire only
        return {}


@cache
def _catalog_resuming(domain: str) -> frozenset[str]:
    try:
        return frozenset(n for n, t in load_domain(domain).tools.items() if t.resumption)
    except Exception:  # an unknown or broken domain: no resuming tool credited
        return frozenset()


def _read_only_map(episode: Episode) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for event in episode.wire or []:
        if event.get("tool"):
            out[str(event["tool"])] = bool(event.get("read_only"))
    return out


def _is_read_only(tool: str, wire: dict[str, bool], domain: str | None) -> bool:
    if tool in wire:
        return wire[tool]
    return bool(domain) and _catalog_read_only(str(domain)).get(tool, False)


def action_identity(action: Any) -> str:
    """A call's identity for alignment and retry detection (an idempotency key aside)."""
    if not isinstance(action, dict):
        return repr(action)
    args = action.get("arguments")
    if isinstance(args, dict):
        args = {k: v for k, v in args.items() if k != "idempotency_key"}
    return json.dumps([action.get("tool"), args], sort_keys=True, default=str)


def unobserved_mutations(episode: EpisodeLike, domain: str | None = None) -> list[str]:
    """Identities of mutating calls whose outcome the agent never observed (see module doc).
    Raises Unsupported when the episode has no transcript."""
    ep = as_episode(episode)
    transcript = ep.transcript
    if transcript is None:
        raise Unsupported("transcript")
    wire = _read_only_map(ep)
    pending: dict[str, None] = {}
    for entry in transcript:
        obs = entry.get("observation")
        if not isinstance(obs, dict) or "tool" not in obs:
            continue  # not an HTTP call: an invalid action, or finish
        tool = str(obs["tool"])
        ident = action_identity(entry.get("action"))
        read_only = _is_read_only(tool, wire, domain)
        resumes = bool(domain) and tool in _catalog_resuming(str(domain))
        if (read_only or resumes) and _definite(obs):
            pending.clear()
            continue
        if read_only:
            continue
        if _definite(obs):
            pending.pop(ident, None)
        else:
            pending[ident] = None
    return list(pending)


def faulted_position(episode: EpisodeLike) -> int | None:
    """0-based transcript position of the call the fault hit, from the proxy's call index."""
    ep = as_episode(episode)
    index = (ep.fault or {}).get("index")  # the fault's record: a dict in the schema
    if not ep.fault_fired or index is None:
        return None
    n = 0
    for pos, entry in enumerate(ep.transcript or []):
        obs = entry.get("observation")
        if isinstance(obs, dict) and "tool" in obs:
            n += 1
            if n == index:
                return pos
    return None
