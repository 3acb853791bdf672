"""B5 client journal with a reconciler, and B5-P, the same with read-only probes.

Zero privilege: the journal lives in the client (this wrapper), never reads a service's
state (B5), and talks to the services only through the proxy.

Every mutating call becomes an *intent* written to the journal before it is sent: its
content (tool and arguments), a deterministic intent id (task instance, content, and the
how-many-th intent of that content it is), and, where the endpoint accepts one, an
idempotency key equal to the intent id. The reconciler then settles each intent:
- acknowledged (2xx): done; a later intent with the same content is a new intent (the agent
  meant to do it again), with a new id and key;
- unknown outcome (transport error or gateway 5xx): re-sent with the SAME key where the
  endpoint takes keys, else re-sent as it is (bounded, like B0); the agent re-sending the
  same content while the intent is still unknown continues that intent, not a new one;
- B5-P only: before an intent's first send, the reads that can show its effect are taken
  as a baseline; before any re-send of an unknown intent, the effect is read back
  (`verify.probe_effect`: a new or changed row carrying the call's arguments);
  found: settled as committed and the agent gets the row (a half-done record finished
  first with its resuming tool, as B6 does: `verify.settle_found`); absent: re-sent (the last read
  is the new baseline); no read derivable or inconclusive: B5's behaviour.
After a worker crash the restarted agent issues its intents again from the start; the
occurrence counters restart with it, so each intent gets its old id back, and one the
journal holds as acknowledged is answered from the journal instead of being sent twice.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from undobench_gym.agents.public_tools import KEY_ARG, PublicTool
from undobench_gym.agents.recovery.base import (
    Call,
    RecoveryWrapper,
    StepResult,
    annotate,
    is_ack,
    is_over,
    is_transient,
    load_obs,
    parse_call,
    status_of,
)
from undobench_gym.agents.recovery.derive import ReadPlan, read_plans
from undobench_gym.agents.recovery.verify import Baseline, probe_effect, settle_found, take_baseline
from undobench_gym.contract.seeding import stable_id


@dataclass
class Intent:
    id: str
    tool: str
    content: str
    key: str | None
    state: str = "pending"  # pending | acked | unknown | refused | committed (probe)
    attempts: int = 0
    observation: str | None = None
    probes: list[str] = field(default_factory=list)
    baseline: Baseline | None = None  # B5-P: the reads before the first send


class ClientJournal(RecoveryWrapper):
    """B5 (`probes=False`) and B5-P (`probes=True`)."""

    def __init__(self, env: Any, *, probes: bool = False, retries: int = 2) -> None:
        super().__init__(env)
        self.probes = probes
        self.retries = retries
        self.method = "B5-P" if probes else "B5"
        self.journal: list[Intent] = []
        self._by_id: dict[str, Intent] = {}
        self._latest: dict[str, Intent] = {}
        self._seen: Counter[str] = Counter()

    def on_reset(self) -> None:
        self.journal, self._by_id, self._latest, self._seen = [], {}, {}, Counter()

    def handle(self, action: Any) -> StepResult:
        call = parse_call(action)
        spec = self.mutating(call)
        if call is None or spec is None:
            result, _ = self.send_bounded(action, self.retries if call else 0)
            return self._watch(result)
        intent = self._intent(call)
        if intent.state in ("acked", "committed") and intent.observation is not None:
            note = "already done before the restart (journal): not sent again"
            text = annotate(intent.observation, method=self.method, intent=intent.id, note=note)
            return self.answer(text, recovery={"method": self.method, "intent": intent.id})
        return self._watch(self._settle(call, spec, intent))

    def _intent(self, call: Call) -> Intent:
        """The journal entry this call continues or starts (written before any send)."""
        latest = self._latest.get(call.content)
        if latest is not None and latest.state == "unknown":
            return latest
        self._seen[call.content] += 1
        intent_id = stable_id(
            "intent", self.task_instance, call.content, self._seen[call.content], length=24
        )
        if intent_id in self._by_id:
            intent = self._by_id[intent_id]
        else:
            key = intent_id if call.tool in self.keyed else None
            intent = Intent(intent_id, call.tool, call.content, key)
            self.journal.append(intent)
            self._by_id[intent_id] = intent
        self._latest[call.content] = intent
        return intent

    def _settle(self, call: Call, spec: PublicTool, intent: Intent) -> StepResult:
        extra = {KEY_ARG: intent.key} if intent.key and KEY_ARG not in call.arguments else {}
        plans: list[ReadPlan] = read_plans(spec, call.arguments, self.tools) if self.probes else []
        if plans and intent.baseline is None and intent.state == "pending":
            intent.baseline, ended = take_baseline(self.send, plans)
            if ended is not None:
                return ended
        sends = 0
        while True:
            if intent.state == "unknown" and self.probes:
                probe = probe_effect(self.send, call, plans, intent.baseline or {})
                intent.probes.append(probe.verdict)
                if probe.result is not None:
                    return probe.result
                if probe.verdict == "present":
                    text, ended = settle_found(self.send, call, probe, self.tools, self.method)
                    if ended is not None:
                        return ended
                    intent.state, intent.observation = "committed", text
                    return self.answer(text)
                if probe.verdict == "absent":
                    intent.baseline = probe.seen
            result = self.send(call.action(**extra))
            intent.attempts += 1
            sends += 1
            obs = load_obs(result[0])
            if is_ack(obs):
                intent.state, intent.observation = "acked", result[0]
            elif is_transient(obs):
                intent.state = "unknown"
            elif status_of(obs) is not None:
                intent.state = "refused"
            if is_over(result) or intent.state != "unknown" or sends > self.retries:
                return result

    def _watch(self, result: StepResult) -> StepResult:
        """A worker crash restarts the agent: its intents count from the start again."""
        if result[4].get("worker_crash"):
            self._seen.clear()
            self._latest.clear()
        return result
