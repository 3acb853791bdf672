"""Train a small recovery policy with REINFORCE, through `gym.make`, and compare it with
naive retry on CRSR over held-out seeds.

The decision task (`UndoBenchExamples/RecoveryDecision-v0`) wraps real UndoBench episodes
of the scripted gold plan on the Payments stack. The plan runs until a mutating call fails
the way a real client sees it (connection reset, timeout, 5xx); then the policy picks one
of four recoveries, the rest of the plan runs, and the reward is the episode's success:

- retry: re-send the same call (what naive retry does);
- verify: call the read-only tool; re-send only if the effect is absent, else adopt it;
- abstain: finish without completing (a safe give-up);
- reconcile: assume it committed: read the resource back and carry on, never re-send.

The policy sees only what an agent can: the kind of error, and the failed tool's effect
class and idempotency from the public catalogue (`undobench tasks --json`), never the
fault's boundary or the hidden coin of ambiguous scenarios. It must learn that a lost
acknowledgement and a request that never arrived look the same.

    pip install 'undobench-gym[train]'      # torch==2.13.0 (CPU)
    python examples/train_recovery_policy.py [--quick] [--episodes N] [--eval-seeds N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

import undobench_gym  # noqa: F401 - registers UndoBench/<Domain>-v0
from undobench_gym.agents.methods import wrap
from undobench_gym.agents.scripted import ScriptedAgent, is_failure, resolve_refs
from undobench_gym.contract.seeding import derive_seed
from undobench_gym.core.catalog import domain, find_workflow
from undobench_gym.core.pairing import run_pair

ENV_ID = "UndoBenchExamples/RecoveryDecision-v0"
ACTIONS = ("retry", "verify", "abstain", "reconcile")
RETRY, VERIFY, ABSTAIN, RECONCILE = range(4)

#: Every Payments fault scenario that hits a mutating call on the wire.
SCENARIOS = {
    "pay-charge-customer": ["pre-503", "lost-ack", "ambiguous"],
    "pay-cross-border-wire": ["wire-lost-ack", "fee-pre-502", "wire-ambiguous"],
    "pay-renew-subscription": ["pre-reset", "lost-ack", "lost-ack-timeout"],
}
QUICK = {k: v for k, v in SCENARIOS.items() if k != "pay-renew-subscription"}

ERRORS = ("connection_reset", "timeout", "http_5xx")
EFFECTS = ("additive", "set", "create_unique", "irreversible_send")
IDEMPOTENCY = ("native", "constraint", "none")
N_FEATURES = len(ERRORS) + len(EFFECTS) + len(IDEMPOTENCY) + 2  # + bias, + "no failure"

Args = dict[str, Any]
# How to look a mutating call's effect up through a read-only tool:
# (read tool, its arguments from the call's, does this record match the call?)
Check = tuple[str, Callable[[Args, list[Any]], Args], Callable[[Args, Any, list[Any]], bool]]
VERIFY_WITH: dict[str, Check] = {
    "create_charge": (
        "list_charges",
        lambda a, _r: {"customer_id": a["customer_id"]},
        lambda a, rec, _r: (
            (rec["amount"], rec["description"], rec["currency"])
            == (a["amount"], a["description"], a["currency"])
        ),
    ),
    "create_wire": (
        "list_wires",
        lambda _a, _r: {},
        lambda a, rec, _r: (
            (rec["quote_id"], rec["beneficiary_iban"]) == (a["quote_id"], a["beneficiary_iban"])
        ),
    ),
    "renew_subscription": (
        "list_invoices",
        lambda a, _r: {"subscription_id": a["subscription_id"]},
        # the plan read the subscription first: its next period is the one billed
        lambda _a, rec, r: rec["period"] == r[0]["period"] + 1,
    ),
}


def _features(obs: dict[str, Any] | None, tool: str | None) -> np.ndarray:
    x = np.zeros(N_FEATURES, dtype=np.float32)
    x[-2] = 1.0  # bias
    if obs is None or tool is None:
        x[-1] = 1.0
        return x
    err = obs.get("error")
    kind = err.get("kind") if isinstance(err, dict) else "http_5xx"
    x[ERRORS.index(kind if kind in ERRORS else "connection_reset")] = 1.0
    spec = domain("payments").tools[tool]
    x[len(ERRORS) + EFFECTS.index(spec.effect_class or "set")] = 1.0
    x[len(ERRORS) + len(EFFECTS) + IDEMPOTENCY.index(spec.idempotency)] = 1.0
    return x


class RecoveryDecisionEnv(gym.Env[np.ndarray, int]):
    """One decision per episode: what to do after a mutating call fails (see the module
    docstring). `reset(seed)` draws a (workflow, scenario) from the seed; pass
    `options={"workflow": ..., "fault": ... or None}` to choose (None: a control run)."""

    def __init__(
        self, scenarios: dict[str, list[str]] | None = None, http_timeout: float = 0.5
    ) -> None:
        self.scenarios = scenarios or SCENARIOS
        self.cases = [(w, s) for w, ss in self.scenarios.items() for s in ss]
        self.inner = gym.make("UndoBench/Payments-v0", max_steps=20, http_timeout=http_timeout)
        self.observation_space = spaces.Box(0.0, 1.0, (N_FEATURES,), dtype=np.float32)
        self.action_space = spaces.Discrete(len(ACTIONS))
        self._plan: list[Args] = []
        self._results: list[Any] = []
        self._cursor = 0
        self._failed: Args | None = None
        self._done: dict[str, Any] | None = None

    # ---- the scripted part --------------------------------------------------------------

    def _call(self, call: Args) -> tuple[dict[str, Any], dict[str, Any] | None]:
        obs, _r, terminated, truncated, info = self.inner.step(call)
        return json.loads(obs), (info if terminated or truncated else None)

    def _finish(self, status: str) -> dict[str, Any]:
        _obs, reward, _t, _tr, info = self.inner.step(
            {"tool": "finish", "arguments": {"status": status}}
        )
        return {"reward": float(reward), "verdict": info["verdict"]}

    def _run_plan(self) -> None:
        """Follow the plan; stop at the first failed mutating call (the decision point)."""
        while self._cursor < len(self._plan):
            step = self._plan[self._cursor]
            try:
                args = resolve_refs(step["arguments"], self._results)
            except (KeyError, IndexError, TypeError, ValueError):
                self._done = self._finish("gave_up")
                return
            call = {"tool": step["tool"], "arguments": args}
            obs, end = self._call(call)
            if end is not None:
                self._done = {"reward": 0.0, "verdict": end["verdict"]}
                return
            self._cursor += 1
            if is_failure(obs):
                spec = domain("payments").tools.get(call["tool"])
                if spec is not None and not spec.read_only and call["tool"] in VERIFY_WITH:
                    self._failed = {"call": call, "obs": obs}
                    return
                self._done = self._finish("gave_up")
                return
            self._results.append(obs.get("body"))
        self._done = self._finish("done")

    def _lookup(self, call: Args) -> Any:
        tool, args_of, match = VERIFY_WITH[call["tool"]]
        obs, _ = self._call({"tool": tool, "arguments": args_of(call["arguments"], self._results)})
        body = obs.get("body") if not is_failure(obs) else None
        for rec in body if isinstance(body, list) else []:
            if isinstance(rec, dict) and match(call["arguments"], rec, self._results):
                return rec
        return None

    # ---- gymnasium API --------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        ep_seed = seed if seed is not None else int(self.np_random.integers(0, 2**31))
        workflow, fault = self.cases[derive_seed(ep_seed, "decision-case") % len(self.cases)]
        if "workflow" in options:
            workflow, fault = options["workflow"], options.get("fault")
        elif "fault" in options:
            fault = options["fault"]
        self.inner.reset(seed=ep_seed, options={"workflow": workflow, "fault": fault})
        self._plan = self.inner.unwrapped.gold_plan()  # type: ignore[attr-defined]
        self._results, self._cursor, self._failed, self._done = [], 0, None, None
        self._run_plan()
        failed = self._failed
        info = {"workflow": workflow, "fault": fault, "decision_needed": failed is not None}
        if failed is not None:
            info["failed_tool"] = failed["call"]["tool"]
        return _features(failed and failed["obs"], failed and failed["call"]["tool"]), info

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._done is None and self._failed is not None:
            call, self._failed = self._failed["call"], None
            result: Any = None
            resend = action == RETRY
            if action in (VERIFY, RECONCILE):
                result = self._lookup(call)
                resend = action == VERIFY and result is None
            if action == ABSTAIN:
                self._done = self._finish("gave_up")
            elif resend:
                obs, end = self._call(call)
                if end is not None:
                    self._done = {"reward": 0.0, "verdict": end["verdict"]}
                elif is_failure(obs):
                    self._done = self._finish("gave_up")
                else:
                    result = obs.get("body")
            if self._done is None:
                self._results.append(result)
                self._run_plan()
                if self._failed is not None:  # a second failure: no second decision
                    self._done = self._finish("gave_up")
        assert self._done is not None
        info = {"verdict": self._done["verdict"], "decision": ACTIONS[action]}
        return _features(None, None), self._done["reward"], True, False, info

    def close(self) -> None:
        self.inner.close()
        super().close()


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=RecoveryDecisionEnv)


# ---- policy and training -------------------------------------------------------------------


class Policy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(N_FEATURES, 16), torch.nn.Tanh(), torch.nn.Linear(16, len(ACTIONS))
        )

    def forward(self, x: torch.Tensor) -> torch.distributions.Categorical:
        return torch.distributions.Categorical(logits=self.net(x))

    def greedy(self, x: np.ndarray) -> int:
        with torch.no_grad():
            return int(self(torch.as_tensor(x)).probs.argmax())


def train(
    env: gym.Env[np.ndarray, int], episodes: int, *, batch: int = 8, lr: float = 0.05, seed: int = 0
) -> tuple[Policy, list[float]]:
    """REINFORCE with a batch-mean baseline; training seeds are 0..episodes-1."""
    torch.manual_seed(seed)
    policy = Policy()
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    curve: list[float] = []
    for start in range(0, episodes, batch):
        logps, rewards = [], []
        for s in range(start, min(start + batch, episodes)):
            x, info = env.reset(seed=s)
            dist = policy(torch.as_tensor(x))
            a = dist.sample()
            _x, r, *_ = env.step(int(a))
            if info["decision_needed"]:
                logps.append(dist.log_prob(a))
                rewards.append(float(r))
        if not rewards:
            continue
        adv = torch.tensor(rewards) - float(np.mean(rewards))
        loss = -(torch.stack(logps) * adv).sum() / len(rewards)
        opt.zero_grad()
        loss.backward()
        opt.step()
        curve.append(float(np.mean(rewards)))
    return policy, curve


def crsr(pairs: list[tuple[bool, bool]]) -> float | None:
    """C/D: both episodes succeeded, among pairs whose control succeeded."""
    d = sum(c for c, _ in pairs)
    return None if d == 0 else sum(c and f for c, f in pairs) / d


def evaluate(
    env: gym.Env[np.ndarray, int], choose: Callable[[np.ndarray], int], seeds: list[int]
) -> tuple[float | None, dict[str, int]]:
    """Paired runs (control, then the fault) for every scenario and held-out seed."""
    base: Any = env.unwrapped
    pairs, choices = [], dict.fromkeys(ACTIONS, 0)
    for workflow, scenarios in base.scenarios.items():
        for fault in scenarios:
            for s in seeds:
                ok = []
                for f in (None, fault):
                    x, info = env.reset(seed=s, options={"workflow": workflow, "fault": f})
                    a = choose(x) if info["decision_needed"] else ABSTAIN
                    choices[ACTIONS[a]] += info["decision_needed"]
                    ok.append(env.step(a)[1] == 1.0)
                pairs.append((ok[0], ok[1]))
    return crsr(pairs), choices


def evaluate_b0(env: gym.Env[np.ndarray, int], seeds: list[int]) -> float | None:
    """The project's B0 method (NaiveRetry wrapper + scripted agent) on the same pairs."""
    base: Any = env.unwrapped
    pairs = []
    for workflow, scenarios in base.scenarios.items():
        wf = find_workflow(workflow)
        for fault in scenarios:
            for s in seeds:
                rec = run_pair(
                    wrap(base.inner, "B0"), ScriptedAgent(), workflow=wf,
                    scenario=wf.scenario(fault), seed=s, method="B0", runtime="process",
                )  # fmt: skip
                pairs.append((rec["control"]["success"], rec["fault"]["success"]))
    return crsr(pairs)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="6 scenarios, no timeout (CI size)")
    p.add_argument("--episodes", type=int, default=None, help="training episodes")
    p.add_argument("--eval-seeds", type=int, default=None, help="held-out seeds per scenario")
    args = p.parse_args(argv)
    episodes = args.episodes or (96 if args.quick else 400)
    n_eval = args.eval_seeds or (3 if args.quick else 10)
    held_out = list(range(100_000, 100_000 + n_eval))  # training uses seeds 0..episodes-1
    t0 = time.monotonic()
    env = gym.make(ENV_ID, scenarios=QUICK if args.quick else SCENARIOS)
    try:
        policy, curve = train(env, episodes)
        learned, choices = evaluate(env, policy.greedy, held_out)
        retry, _ = evaluate(env, lambda _x: RETRY, held_out)
        b0 = evaluate_b0(env, held_out)
    finally:
        env.close()
    result = {
        "episodes": episodes,
        "held_out_seeds": n_eval,
        "train_reward_first_last": [curve[0], curve[-1]] if curve else None,
        "crsr_learned": learned,
        "crsr_naive_retry": retry,
        "crsr_B0": b0,
        "learned_choices": choices,
        "wall_s": round(time.monotonic() - t0, 1),
    }
    print(f"CRSR over held-out seeds: learned policy {learned:.3f}  naive retry {retry:.3f}"
          f"  (B0 wrapper {b0:.3f}); learned choices {choices}")  # fmt: skip
    return result


if __name__ == "__main__":
    out = main()
    print(json.dumps(out))
    sys.exit(0 if (out["crsr_learned"] or 0) > (out["crsr_naive_retry"] or 0) else 1)
