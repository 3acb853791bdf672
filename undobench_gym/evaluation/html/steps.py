"""The steps of one episode as the pair viewer shows them: each call with what the agent
saw, what the wire did, who made the call (the agent, or its recovery wrapper's retry,
probe or compensation), whether the fault hit it and which harm it committed.

Harms are placed by matching the verdict's effect identities against the call's arguments
(a call that reached the service with no error status, past the required count for a
duplicate): a display aid; the verdict itself comes from the oracles.
"""

from __future__ import annotations

import json
from typing import Any

from undobench_gym.contract.specs import Verdict
from undobench_gym.core.schema import EpisodeRecord
from undobench_gym.evaluation.outcomes import action_identity, faulted_position
from undobench_gym.evaluation.records import EpisodeLike, as_episode

#: The longest text kept of one action argument set or observation body in the viewer.
TEXT_LIMIT = 600
#: A harm's singular name: the CSS class suffix and the filter value.
HARM_NAME = {
    "duplicates": "duplicate",
    "unrequired": "unrequired",
    "missing": "missing",
    "partial": "partial",
    "forbidden": "forbidden",
}

Episode = EpisodeRecord


def placed_harms(verdict: Verdict | None) -> tuple[tuple[str, list[dict[str, Any]]], ...]:
    """The verdict's unrequired and forbidden effects, by HARM_NAME key (none without a
    verdict): the harms placed on a call or commit-log row by their identity alone."""
    if verdict is None:
        return ()
    return (("unrequired", verdict.unrequired), ("forbidden", verdict.forbidden))


def short(value: Any, limit: int = TEXT_LIMIT) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _action_text(action: Any) -> str:
    if isinstance(action, dict):
        return f"{action.get('tool')}({short(action.get('arguments', {}))})"
    return short(action)


def _observation_text(obs: Any) -> str:
    if isinstance(obs, str):
        try:
            obs = json.loads(obs)
        except ValueError:
            return short(obs)
    if not isinstance(obs, dict):
        return short(obs)
    if isinstance(obs.get("error"), dict):
        err = obs["error"]
        kind = err.get("kind") or err.get("message") or ""
        return f"{err.get('type')} error: {kind}"
    if "status" in obs:
        return f"{obs['status']} {short(obs.get('body'))}"
    return short(obs)


def wire_text(event: dict[str, Any] | None) -> str | None:
    if event is None:
        return None
    parts = [f"#{event.get('index')} {event.get('method')} {event.get('path')}"]
    parts.append(f"→ {event.get('outcome')}")
    if event.get("status") is not None:
        parts.append(f"status {event['status']}")
    if event.get("upstream_status") is not None:
        parts.append(f"upstream {event['upstream_status']}")
    if event.get("forwarded") is False:
        parts.append("not forwarded")
    return " ".join(parts)


def _may_commit(event: dict[str, Any] | None) -> bool:
    """Whether a mutating wire call may have committed: it reached the service and no
    error status came back (a 2xx seen by the agent or not, or a crash mid-call)."""
    if event is None or event.get("read_only") or event.get("forwarded") is False:
        return False
    code = event.get("upstream_status") or event.get("status")
    return not (isinstance(code, int) and code >= 300)


def _wrapper_kinds(ep: Episode, tools: dict[str, str]) -> dict[int, str]:
    """Transcript position -> who made the call: `agent`, or the recovery wrapper's
    `retry` (the agent's call again), `probe` (a read) or `compensation` / `wrapper`.
    From the agent's own view (`agent_transcript`: how many env steps each agent step
    took); without it every call is the agent's."""
    view = ep.agent_transcript
    transcript = ep.transcript or []
    if not view:
        return dict.fromkeys(range(len(transcript)), "agent")
    kinds: dict[int, str] = {}
    pos = 0
    for step in view:
        span = list(range(pos, min(pos + int(step.get("env_steps") or 0), len(transcript))))
        pos += len(span)
        own = action_identity(step.get("action"))
        ids = [action_identity(transcript[i].get("action")) for i in span]
        first = next((i for i, x in zip(span, ids, strict=True) if x == own), None)
        if first is None and span:
            first = span[0]
        for i, x in zip(span, ids, strict=True):
            action = transcript[i].get("action")
            tool = action.get("tool") if isinstance(action, dict) else None
            if i == first:
                kinds[i] = "agent"
            elif x == own:
                kinds[i] = "retry"
            else:
                kinds[i] = {"read": "probe", "compensation": "compensation"}.get(
                    tools.get(str(tool), ""), "wrapper"
                )
    for i in range(pos, len(transcript)):
        kinds[i] = "agent"
    return kinds


def matches(identity: Any, arguments: Any) -> bool:
    """Whether a call's arguments carry every field of an effect identity."""
    if not isinstance(identity, dict) or not identity or not isinstance(arguments, dict):
        return False
    return all(str(arguments.get(k)).lower() == str(v).lower() for k, v in identity.items())


def as_dict(identity: Any) -> Any:
    if isinstance(identity, str):
        try:
            return json.loads(identity)
        except ValueError:
            return identity
    return identity


def _answered(step: dict[str, Any]) -> dict[str, Any]:
    return {
        "n": step.get("step"),
        "who": "answered",
        "a": _action_text(step.get("action")),
        "o": _observation_text(step.get("observation")),
        "w": None,
        "harm": [],
    }


def episode_cells(
    episode: EpisodeLike | None, domain_tools: dict[str, str]
) -> list[dict[str, Any]]:
    """The episode's steps as viewer cells: call, what the agent saw, what the wire did,
    who made it, whether the fault hit it, and the harms it caused."""
    if not episode:
        return []
    ep = as_episode(episode)
    transcript = ep.transcript or []
    wire = {e.get("index"): e for e in ep.wire or []}
    read = {str(e.get("tool")): "read" for e in wire.values() if e.get("read_only")}
    tools = {**domain_tools, **read}
    kinds = _wrapper_kinds(ep, tools)
    hit = faulted_position(ep)
    verdict = ep.verdict
    cells: list[dict[str, Any]] = []
    calls = 0
    seen: dict[int, int] = {}  # duplicates entry -> committed matching calls so far
    for pos, entry in enumerate(transcript):
        action, obs = entry.get("action"), entry.get("observation")
        event = None
        if isinstance(obs, dict) and "tool" in obs:
            calls += 1
            event = wire.get(calls)
        args = action.get("arguments") if isinstance(action, dict) else None
        harm: list[str] = []
        if _may_commit(event):
            for j, dup in enumerate(verdict.duplicates if verdict is not None else []):
                if matches(as_dict(dup.get("identity")), args):
                    seen[j] = seen.get(j, 0) + 1
                    if seen[j] > int(dup.get("required") or 1):
                        harm.append("duplicate")
            for key, items in placed_harms(verdict):
                for item in items:
                    if matches(as_dict(item.get("identity")), args):
                        harm.append(HARM_NAME[key])
        cells.append(
            {
                "n": entry.get("step", pos + 1),
                "who": kinds.get(pos, "agent"),
                "id": action_identity(action),
                "a": _action_text(action),
                "o": _observation_text(obs),
                "w": wire_text(event),
                "fault": pos == hit,
                "harm": sorted(set(harm)),
            }
        )
    # steps the wrapper answered itself (no call) go after the call before them
    view = ep.agent_transcript or []
    out: list[dict[str, Any]] = []
    pos = 0
    for step in view:
        span = int(step.get("env_steps") or 0)
        out.extend(cells[pos : pos + span])
        pos += span
        if step.get("answered_by_wrapper") and span == 0:
            out.append(_answered(step))
    out.extend(cells[pos:])
    return out
