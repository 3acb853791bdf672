"""The warm start of examples/train_grpo.py: supervised LoRA fine-tuning on demonstrations.

SmolLM2-135M as shipped never writes a well-formed tool call, so every GRPO reward is 0 and
no group has a reward spread: GRPO alone cannot move it. Before GRPO, the LoRA is fitted to
demonstrations: real episodes of the benchmark's scripted agent (the workflow's gold plan)
on TRAINING seeds (9000 and up; GRPO's rows use 0, 1, 2, ...; evaluation 100000 and up),
alternating the control episode with each fault scenario, the agent wrapped in a variant of
B6 verify-before-retry (after an unknown outcome, read the effect back, then decide: found,
so finish; absent, so re-send), recorded with `undobench_gym.harness.rl.demos` and rendered with the
same system prompt, chat template and tool schemas as the GRPO phase. Only demonstrations
the verdict calls a success are used (a crash that leaves a git lock file defeats this
agent, so those recordings are dropped and counted).
A plain torch loop (next-token loss on the assistant turns only, the tool calls and the
closing text) is all this needs: a handful of short conversations, batch size 1, no
packing, no scheduler; TRL's SFTTrainer would bring a second trainer, its data collator and
its own assistant-mask template requirements for the same 20 lines.
"""

from __future__ import annotations

import time
from typing import Any

DEMO_SEEDS_FROM = 9_000  # training seeds (0-9999), apart from the GRPO rows (0, 1, 2, ...)


def verify_after_failure(env: Any) -> Any:
    """B6 verify-before-retry without its baseline reads: the gold plan runs as it is, and
    only after a mutating call's outcome is unknown (a transport error, a gateway 5xx) are
    its effect's reads made; a matching row means the call committed (not re-sent), none
    means re-send. Without the baseline a row from the fixture's history that happened to
    match would read as the effect, so this is for demonstrations only, which are kept only
    when the verdict calls them a success; it keeps them as short as the gold plan allows
    (a B6 baseline adds a read before every mutation, hundreds of tokens of tool output)."""
    from undobench_gym.agents.recovery.base import is_over, is_transient, load_obs, parse_call
    from undobench_gym.agents.recovery.verify import (
        VerifyBeforeRetry,
        found_observation,
        probe_effect,
    )

    class _VerifyAfterFailure(VerifyBeforeRetry):  # type: ignore[misc]
        method = "verify-after-failure"

        def handle(self, action: Any) -> Any:
            call = parse_call(action)
            spec = self.mutating(call)
            if call is None or spec is None:
                return self.send(action)
            plans = self.plans(call, spec)
            result = self.send(action)
            if is_over(result) or not is_transient(load_obs(result[0])):
                return result
            probe = probe_effect(self.send, call, plans, {p.tool: frozenset() for p in plans})
            if probe.result is not None:
                return probe.result
            if probe.verdict == "present":
                return self.answer(found_observation(call, probe, self.method))
            return self.send(action) if probe.verdict == "absent" else result

    return _VerifyAfterFailure(env)


def collect(
    workflows: list[str], scenarios: dict[str, list[str]], per_workflow: int, max_steps: int
) -> tuple[list[Any], list[Any]]:
    """Per workflow, `per_workflow` episodes on seeds DEMO_SEEDS_FROM and up, alternating the
    control with each fault scenario. Returns (successful demos, failed recordings)."""
    import gymnasium as gym

    from undobench_gym.agents.scripted import ScriptedAgent
    from undobench_gym.core import catalog
    from undobench_gym.core.registration import ENV_IDS
    from undobench_gym.harness.rl.demos import record_demos

    ids = {d: e for e, d in ENV_IDS.items()}
    kept: list[Any] = []
    failed: list[Any] = []
    for wf in workflows:
        cycle: list[str | None] = [None, *scenarios.get(wf, [])]
        episodes = [(DEMO_SEEDS_FROM + k, wf, cycle[k % len(cycle)]) for k in range(per_workflow)]
        env: Any = gym.make(ids[catalog.find_workflow(wf).domain], max_steps=max_steps)
        try:
            demos = record_demos(env, ScriptedAgent(), episodes, method=verify_after_failure)
        finally:
            env.close()
        kept += [d for d in demos if d.success]
        failed += [d for d in demos if not d.success]
    return kept, failed


def encode(tok: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """Token ids and labels of one conversation: labels are the ids on the assistant turns
    (what the model writes, `<|im_end|>` included) and -100 elsewhere (system, task, tool
    results), found by rendering each prefix with the chat template."""
    import torch

    def render(msgs: list[dict[str, Any]], gen: bool) -> str:
        return str(
            tok.apply_chat_template(msgs, tools=tools, add_generation_prompt=gen, tokenize=False)
        )

    full = render(messages, False)
    spans = []
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            start, end = len(render(messages[:i], True)), len(render(messages[: i + 1], False))
            if not full.startswith(render(messages[: i + 1], False)):
                raise ValueError("the chat template does not render conversations prefix-stably")
            spans.append((start, end))
    enc = tok(full, add_special_tokens=False, return_offsets_mapping=True)
    ids = enc["input_ids"]
    labels = [
        t if any(s <= a < e for s, e in spans) else -100
        for t, (a, _b) in zip(ids, enc["offset_mapping"], strict=True)
    ]
    return torch.tensor([ids]), torch.tensor([labels])


def train(
    model: Any,
    tok: Any,
    demos: list[Any],
    tools_for: dict[str, list[dict[str, Any]]],
    system: str,
    *,
    epochs: int,
    lr: float,
    seed: int = 0,
) -> dict[str, Any]:
    """Fit the LoRA (the model's trainable parameters) to the demonstrations; returns the
    mean loss per epoch, the token counts and the wall time."""
    import torch

    from undobench_gym.core import catalog

    torch.manual_seed(seed)
    data = [
        encode(tok, d.messages(system), tools_for[catalog.find_workflow(d.workflow).domain])
        for d in demos
    ]
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    model.train()
    t0 = time.monotonic()
    losses: list[float] = []
    for _ in range(epochs):
        total = 0.0
        for k in torch.randperm(len(data)).tolist():
            ids, labels = data[k]
            loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            total += float(loss.detach())
        losses.append(round(total / max(1, len(data)), 4))
    model.eval()
    return {
        "demos": len(demos),
        "epochs": epochs,
        "losses": losses,
        "tokens": sum(int(ids.shape[1]) for ids, _ in data),
        "assistant_tokens": sum(int((lab != -100).sum()) for _, lab in data),
        "train_s": round(time.monotonic() - t0, 1),
    }
