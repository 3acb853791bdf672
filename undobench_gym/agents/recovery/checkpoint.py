"""B1 checkpoint/resume: the harness-side checkpoint protocol for POST_ACK_PRE_CHECKPOINT.

The fault: a call commits and is acknowledged, then the agent's worker dies before the
agent checkpoints, and the harness (`pairing.run_episode`) restarts the agent from its last
own checkpoint (the task start). Without B1 the resumed agent re-does every step, and the
acknowledged mutation happens twice.

B1 moves the checkpoint out of the worker: this wrapper, on the harness side of the env,
journals every step the moment its answer comes back, before the worker sees it. So the
journal holds the crashed step too. When `info["worker_crash"]` arrives, the wrapper
replays: while the resumed agent asks for exactly the journaled steps in order, it answers
each from the journal without a call, which brings the agent back to where it was, with
the acknowledged results it lost. The first action that differs (an LLM that resumes on
another path) ends the replay and goes to the env as usual.

B1 does not retry anything: it changes one thing, resumption. Compose it with a retrying
method when both are wanted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from undobench_gym.agents.recovery.base import RecoveryWrapper, StepResult, canonical, parse_call


def action_key(action: Any) -> str:
    """What identifies a step for replay: the decoded call, or the raw action if malformed."""
    call = parse_call(action)
    if call is not None:
        return canonical([call.tool, call.arguments])
    return "raw:" + (action if isinstance(action, str) else repr(action))[:4096]


@dataclass(frozen=True)
class Checkpoint:
    key: str
    observation: str


class CheckpointResume(RecoveryWrapper):
    """B1: every answered step is checkpointed on the harness side; after a worker crash the
    resumed agent's repeated steps are answered from the checkpoints, not sent again."""

    method = "B1"

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.journal: list[Checkpoint] = []
        self.cursor: int | None = None  # replay position after a crash, None when live
        self.replayed = 0

    def on_reset(self) -> None:
        self.journal, self.cursor, self.replayed = [], None, 0

    def handle(self, action: Any) -> StepResult:
        key = action_key(action)
        if self.cursor is not None:
            replay = self._replay(key)
            if replay is not None:
                return replay
        result = self.send(action)
        self.journal.append(Checkpoint(key, result[0]))
        if result[4].get("worker_crash"):
            self.cursor = 0
        return result

    def _replay(self, key: str) -> StepResult | None:
        assert self.cursor is not None
        if self.cursor == 0:
            # The resumed agent may restart from its own later checkpoint: find its place.
            self.cursor = next((i for i, c in enumerate(self.journal) if c.key == key), None)
        if self.cursor is None or self.journal[self.cursor].key != key:
            self.cursor = None  # the agent took another path: live from here on
            return None
        entry = self.journal[self.cursor]
        self.cursor += 1
        self.replayed += 1
        if self.cursor >= len(self.journal):
            self.cursor = None
        return self.answer(entry.observation, replayed=True, recovery={"method": self.method})
