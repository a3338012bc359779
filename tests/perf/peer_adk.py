"""The google-adk peer of `bench_starts.py`, run by the throwaway venv's python (never
imported by phloem): `python peer_adk.py start_waiting N` prints one JSON line with the
seconds ADK's `Runner` takes to bring N agent runs to a model that waits (each run a
task on one event loop, as ADK runs them), the RSS per waiting run, and ADK's version.

The model is a `BaseLlm` whose call awaits an event: the same "run waiting on its
model" as phloem's side of the benchmark (a `ScriptedModel` step that blocks).
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
    print(json.dumps({"error": f"unknown command {argv!r}"}))
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
