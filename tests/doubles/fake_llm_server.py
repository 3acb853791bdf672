"""A fake OpenAI-compatible chat-completions server for tests.

A TEST DOUBLE FOR THE PROTOCOL, NOT A MODEL: it speaks the real wire schema (POST
/v1/chat/completions, GET /v1/models; ids, choices[].message with content/tool_calls,
finish_reason, usage) and answers from a scripted *policy*, a function of the request body
(messages, tools, seed). The policies below follow a gold plan that a callback supplies
(from the task text; the results of earlier calls are read back from the messages), and can
be wrapped to emit malformed tool calls, unknown tools, refusals, several calls in one
reply, HTTP errors for chosen requests, or slow replies. A request without `tools` is
answered in ReAct text (`Thought:` / `Action: {...}`), so one policy serves F1 and F2.
Everything but the error/delay wrappers is deterministic given (messages, seed). Like a
real server it rejects (HTTP 400) a conversation whose tool calls are not each answered.
It listens on 127.0.0.1 only, on an ephemeral port.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from undobench_gym.agents.scripted import is_failure, resolve_refs

CREATED = 1_700_000_000  # fixed, so a reply depends only on (messages, seed)
REFUSAL = "I can't help with that."


@dataclass(frozen=True)
class FakeReply:
    content: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, raw arguments)
    finish_reason: str | None = None  # default: "tool_calls" with calls, else "stop"
    status: int = 200  # anything else: an HTTP error with an OpenAI-style error body
    delay_s: float = 0.0


Policy = Callable[[dict[str, Any]], FakeReply]
PlanFor = Callable[[str], list[dict[str, Any]]]  # task text -> gold plan (with @N refs)


# ---- reading the conversation ------------------------------------------------------


def is_react(body: dict[str, Any]) -> bool:
    return not body.get("tools")


def task_text(body: dict[str, Any]) -> str:
    return next(str(m["content"]) for m in body["messages"] if m["role"] == "user")


def _observation(message: dict[str, Any], react: bool) -> dict[str, Any] | None:
    content = message.get("content")
    if not isinstance(content, str):
        return None
    if react:
        if message["role"] != "user" or not content.startswith("Observation:"):
            return None
        content = content.removeprefix("Observation:")
    elif message["role"] != "tool":
        return None
    try:
        value = json.loads(content)
    except json.JSONDecodeError:
        return None  # e.g. the agent's "not executed" answer to an extra call
    return value if isinstance(value, dict) else None


def observations(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The env's observations so far, in order, as the agent relayed them."""
    react = is_react(body)
    return [o for m in body["messages"] if (o := _observation(m, react)) is not None]


def is_invalid(obs: dict[str, Any]) -> bool:
    err = obs.get("error")
    return isinstance(err, dict) and err.get("type") == "invalid_action"


def progress(body: dict[str, Any]) -> int:
    """How many plan steps were executed: observations that are not invalid-action errors."""
    return sum(1 for o in observations(body) if not is_invalid(o))


def call(body: dict[str, Any], tool: str, arguments: Any, note: str = "") -> FakeReply:
    if is_react(body):
        action = json.dumps({"tool": tool, "arguments": arguments})
        return FakeReply(
            content=f"Thought: {note or 'next ' + tool}.\nAction: ```json\n{action}\n```"
        )
    return FakeReply(tool_calls=[(tool, json.dumps(arguments))])


# ---- policies ------------------------------------------------------------------------


def gold_plan(plan_for: PlanFor) -> Policy:
    """Follow the plan; give up at the first failed call (like the scripted agent)."""

    def policy(body: dict[str, Any]) -> FakeReply:
        plan = plan_for(task_text(body))
        results = []
        for obs in (o for o in observations(body) if not is_invalid(o)):
            if is_failure(obs):
                return call(body, "finish", {"status": "gave_up", "summary": "a call failed"})
            results.append(obs.get("body"))
        if len(results) >= len(plan):
            return call(body, "finish", {"status": "done", "summary": "done"})
        step = plan[len(results)]
        return call(body, step["tool"], resolve_refs(step["arguments"], results))

    return policy


def malformed(inner: Policy, at_step: int, kind: str = "json") -> Policy:
    """At plan step `at_step`, first emit a broken call: `json` (arguments that are not
    JSON), or `unknown_tool`; after the env's invalid-action answer, go on with `inner`."""
    if kind not in ("json", "unknown_tool"):
        raise ValueError("kind is 'json' or 'unknown_tool'")

    def policy(body: dict[str, Any]) -> FakeReply:
        seen = observations(body)
        if progress(body) != at_step or (seen and is_invalid(seen[-1])):
            return inner(body)
        good = inner(body)
        name = good.tool_calls[0][0] if good.tool_calls else "get_customer"
        if kind == "unknown_tool":
            return call(body, "transfer_all_funds", {})
        if is_react(body):
            return FakeReply(content=f'Thought: go.\nAction: {{"tool": "{name}", "arguments": {{')
        return FakeReply(tool_calls=[(name, '{"customer_id": "cus_')])

    return policy


def refusing(inner: Policy, at_step: int, times: int = 1) -> Policy:
    """At plan step `at_step`, refuse in plain text (finish_reason stop) `times` times in a
    row, then go on with `inner`."""

    def policy(body: dict[str, Any]) -> FakeReply:
        if progress(body) != at_step:
            return inner(body)
        react, refusals = is_react(body), 0
        for m in reversed(body["messages"]):
            obs = _observation(m, react)
            if obs is not None and not is_invalid(obs):
                break
            if m["role"] == "assistant" and m.get("content") == REFUSAL:
                refusals += 1
        return FakeReply(content=REFUSAL) if refusals < times else inner(body)

    return policy


def multi_call(inner: Policy) -> Policy:
    """Native mode: every tool call but finish comes with two more in the same reply, a
    repeat of it and a finish (the agent must execute only the first)."""

    def policy(body: dict[str, Any]) -> FakeReply:
        reply = inner(body)
        if is_react(body) or len(reply.tool_calls) != 1 or reply.tool_calls[0][0] == "finish":
            return reply
        done = ("finish", json.dumps({"status": "done", "summary": "all done"}))
        return FakeReply(tool_calls=[*reply.tool_calls * 2, done])

    return policy


class drifting:  # lower case: used like the other policy wrappers
    """A server whose sampling is not reproducible, as a batching one's is not: the second
    time it gets the very same request it answers otherwise, with a finish that gives up
    (so an episode that asks again parts from the first before any fault). Stateful on
    purpose; `repeats` counts the requests it answered otherwise."""

    def __init__(self, inner: Policy) -> None:
        self.inner, self.seen, self.repeats = inner, set(), 0  # type: ignore[var-annotated]
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> FakeReply:
        key = _digest(body.get("messages"), body.get("tools"), body.get("seed"))
        with self._lock:
            again = key in self.seen
            self.seen.add(key)
            self.repeats += again
        if again:
            return call(body, "finish", {"status": "gave_up", "summary": "changed my mind"})
        return self.inner(body)


class failing:  # lower case: used like the other policy wrappers
    """Answer the listed requests (0-based, counted by this wrapper) with HTTP `status`, or
    delay them by `delay_s` when status is 200 (for client timeouts). Stateful on purpose."""

    def __init__(
        self, inner: Policy, requests: set[int] | range, status: int = 500, delay_s: float = 0
    ) -> None:
        self.inner, self.requests, self.status, self.delay_s = inner, set(requests), status, delay_s
        self.seen = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> FakeReply:
        with self._lock:
            n, self.seen = self.seen, self.seen + 1
        if n not in self.requests:
            return self.inner(body)
        if self.status != 200:
            return FakeReply(status=self.status)
        return FakeReply(content="(late)", delay_s=self.delay_s)


# ---- the server ------------------------------------------------------------------------


def _digest(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": status}},
        status_code=status,
    )


def unanswered_tool_calls(messages: list[dict[str, Any]]) -> list[str]:
    """tool_call ids of assistant messages that no `tool` message answers before the next
    assistant or user message (the real API rejects such a conversation)."""
    missing: list[str] = []
    open_ids: list[str] = []
    for m in [*messages, {"role": "end"}]:
        if m["role"] == "tool":
            if m.get("tool_call_id") in open_ids:
                open_ids.remove(m["tool_call_id"])
            continue
        missing.extend(open_ids)
        open_ids = [c["id"] for c in m.get("tool_calls") or []] if m["role"] == "assistant" else []
    return missing


def build_app(server: FakeServer) -> FastAPI:
    app = FastAPI(title="fake chat completions (test double)")

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": "fake", "object": "model", "created": CREATED, "owned_by": "test"}],
        }

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        if not isinstance(body.get("messages"), list) or not body.get("model"):
            return _error(400, "'model' and 'messages' are required")
        if missing := unanswered_tool_calls(body["messages"]):
            return _error(400, f"tool_call_ids without a tool message: {missing}")
        server.requests.append(body)
        reply = server.policy(body)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.status != 200:
            kind = "rate_limit_error" if reply.status == 429 else "server_error"
            return _error(reply.status, f"fake provider error {reply.status}", kind)
        return JSONResponse(completion(body, reply))

    return app


def completion(body: dict[str, Any], reply: FakeReply) -> dict[str, Any]:
    key = _digest(body["messages"], body.get("seed"), body.get("tools"))
    content = reply.content
    for stop in body.get("stop") or []:
        if content is not None and stop in content:
            content = content[: content.index(stop)]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{_digest(key, i)[:24]}",
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
    prompt = len(json.dumps(body["messages"])) // 4
    produced = len(json.dumps(message)) // 4
    return {
        "id": f"chatcmpl-{key[:24]}",
        "object": "chat.completion",
        "created": CREATED,
        "model": body["model"],
        "system_fingerprint": "fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": reply.finish_reason
                or ("tool_calls" if reply.tool_calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": produced,
            "total_tokens": prompt + produced,
        },
    }


class FakeServer:
    """`with FakeServer(policy) as fake:` serves on `fake.base_url` (…/v1) from a thread.
    `policy` may be swapped between tests; `requests` logs every accepted request body."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy: Policy = policy or (lambda body: FakeReply(content=REFUSAL))
        self.requests: list[dict[str, Any]] = []
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(build_app(self), log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the fake chat-completions server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
