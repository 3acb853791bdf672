"""How an agent acted, beside whether it succeeded: schema-valid tool calls, turns, tokens
and time per pair. For LLM agents above all (a tiny model's actions are often invalid, and
that is the first thing to look at), but defined for any agent from the transcripts."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from undobench_gym.evaluation.indicators import is_infra_error
from undobench_gym.evaluation.records import AgentStats, PairLike, as_records


def _invalid(entry: dict[str, Any]) -> bool:
    obs = entry.get("observation")
    return isinstance(obs, dict) and (obs.get("error") or {}).get("type") == "invalid_action"


def agent_behaviour(trials: Iterable[PairLike]) -> dict[str, Any]:
    """Over the pairs without an infrastructure error: actions (every step, `finish`
    included), the share the env accepted as schema-valid calls, turns per episode, how
    episodes ended, and (where the agent counted them) tokens and tokens per second."""
    pairs = [p for p in as_records(trials) if not is_infra_error(p)]
    # Imported records (published results) carry no transcripts or timings: counted as none.
    episodes = [ep for p in pairs for ep in (p.control, p.fault)]
    steps = [e for ep in episodes for e in ep.transcript or []]
    invalid = sum(_invalid(e) for e in steps)
    turns = [len(ep.transcript or []) for ep in episodes]
    walls = [p.wall_ms for p in pairs if p.wall_ms is not None]
    out: dict[str, Any] = {
        "pairs": len(pairs),
        "episodes": len(episodes),
        "actions": len(steps),
        "valid_actions": len(steps) - invalid,
        "valid_action_rate": round((len(steps) - invalid) / len(steps), 4) if steps else None,
        "turns_per_episode_median": statistics.median(turns) if turns else None,
        "finished_episodes": sum(bool(ep.finish_status) for ep in episodes),
        "control_success": sum(p.control.success for p in pairs),
        "seconds_per_pair_median": round(statistics.median(walls) / 1000, 2) if walls else None,
    }
    with_stats = [p for p in pairs if p.agent_stats is not None]
    stats = [AgentStats.model_validate(p.agent_stats) for p in with_stats]
    if stats:
        completion = sum(s.completion_tokens for s in stats)
        prompt = sum(s.prompt_tokens for s in stats)
        wall_s = sum(p.wall_ms or 0 for p in with_stats) / 1000
        out |= {
            "requests": sum(s.requests for s in stats),
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            # of the pairs' whole wall time (env steps included): a floor on the model's speed
            "completion_tokens_per_s": round(completion / wall_s, 2) if wall_s else None,
            "provider_errors": sum(s.provider_errors for s in stats),
            "trimmed_messages": sum(s.trimmed_messages for s in stats),
            "unconstrained_replies": sum(s.unconstrained_replies for s in stats),
            # the control's replies taken by fault episodes instead of sampling again
            "replayed_replies": sum(s.replayed_replies for s in stats),
        }
    return out
