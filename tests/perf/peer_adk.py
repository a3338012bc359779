"""The google-adk peer of `bench_starts.py` and `bench_runs.py`, run by the throwaway
venv's python (never imported by phloem); each command prints one JSON line with ADK's
version and its figures:

- `start_waiting N`: the seconds ADK's `Runner` takes to bring N agent runs to a model
  that waits (each run a task on one event loop, as ADK runs them) and the RSS per
  waiting run. The model is a `BaseLlm` whose call awaits an event: the same "run
  waiting on its model" as phloem's side (a model whose answer is a future not yet set).
- `one_run N`: the median seconds of one whole agent run (a new session, the model calls
  the function tool `add`, then answers), over N runs after a warm-up.
- `runs N C`: the wall seconds of N such runs, at most C at once.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import resource
import sys
import time
from collections.abc import AsyncGenerator
from typing import Any

import google.adk
from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

APP = "bench"


class WaitingModel(BaseLlm):
    """A model that tells `waiting` it was called, then waits for `release`."""

    model: str = "waiting"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        state = STATE
        state["waiting"] += 1
        if state["waiting"] >= state["target"]:
            state["all"].set()
        await state["release"].wait()
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="done")]))


STATE: dict[str, Any] = {}


def _rss() -> int:
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


async def _drain(runner: Runner, session_id: str) -> None:
    message = types.Content(role="user", parts=[types.Part(text="go")])
    async for _ in runner.run_async(user_id="u", session_id=session_id, new_message=message):
        pass


class ToolThenAnswer(BaseLlm):
    """Calls the tool `add` first; once the request holds its response, answers."""

    model: str = "tool-then-answer"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1] if llm_request.contents else None
        answered = last is not None and any(p.function_response for p in last.parts or ())
        if answered:
            part = types.Part(text="done")
        else:
            call = types.FunctionCall(name="add", args={"a": 1, "b": 2})
            part = types.Part(function_call=call)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _tool_runner() -> tuple[Runner, InMemorySessionService]:
    sessions = InMemorySessionService()
    agent = LlmAgent(name="tooler", model=ToolThenAnswer(), instruction="", tools=[add])
    return Runner(agent=agent, app_name=APP, session_service=sessions), sessions


async def _one(runner: Runner, sessions: InMemorySessionService, i: int) -> None:
    session = await sessions.create_session(app_name=APP, user_id="u", session_id=f"r{i}")
    await _drain(runner, session.id)


async def one_run(n: int) -> dict[str, Any]:
    runner, sessions = _tool_runner()
    for i in range(20):  # warm-up
        await _one(runner, sessions, -1 - i)
    samples = []
    for i in range(n):
        t0 = time.perf_counter()
        await _one(runner, sessions, i)
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return {"seconds": samples[len(samples) // 2], "version": google.adk.__version__}


async def runs(n: int, concurrency: int) -> dict[str, Any]:
    runner, sessions = _tool_runner()
    for i in range(20):  # warm-up
        await _one(runner, sessions, -1 - i)
    gate = asyncio.Semaphore(concurrency)

    async def bounded(i: int) -> None:
        async with gate:
            await _one(runner, sessions, i)

    t0 = time.perf_counter()
    await asyncio.gather(*(bounded(i) for i in range(n)))
    return {"seconds": time.perf_counter() - t0, "version": google.adk.__version__}


async def start_waiting(n: int) -> dict[str, Any]:
    STATE.update(waiting=0, target=n, all=asyncio.Event(), release=asyncio.Event())
    sessions = InMemorySessionService()
    agent = LlmAgent(name="waiter", model=WaitingModel(), instruction="")
    runner = Runner(agent=agent, app_name=APP, session_service=sessions)
    before = _rss()
    t0 = time.perf_counter()
    tasks = []
    for i in range(n):
        session = await sessions.create_session(app_name=APP, user_id="u", session_id=f"s{i}")
        tasks.append(asyncio.create_task(_drain(runner, session.id)))
    await asyncio.wait_for(STATE["all"].wait(), 600)
    seconds = time.perf_counter() - t0
    per_kib = (_rss() - before) / n / 1024
    STATE["release"].set()
    await asyncio.gather(*tasks)
    return {"seconds": seconds, "rss_kib": per_kib, "version": google.adk.__version__}


def main(argv: list[str]) -> int:
    logging.disable(logging.WARNING)  # ADK warns once per call of a model without usage
    if argv[:1] == ["start_waiting"]:
        print(json.dumps(asyncio.run(start_waiting(int(argv[1])))), flush=True)
        return 0
    if argv[:1] == ["one_run"]:
        print(json.dumps(asyncio.run(one_run(int(argv[1])))), flush=True)
        return 0
    if argv[:1] == ["runs"]:
        print(json.dumps(asyncio.run(runs(int(argv[1]), int(argv[2])))), flush=True)
        return 0
    print(json.dumps({"error": f"unknown command {argv!r}"}))
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
