"""The xoscar side of `bench_daemon`: run by a throwaway venv's Python, never imported.

Starts an xoscar actor pool with one sub-process, creates an echo actor in that
sub-process, then answers commands read from stdin, one JSON line out per line in:
`latency N` (median seconds of N sequential asks from one coroutine) and
`rate CALLERS ASKS` (asks/s of CALLERS coroutines sharing one actor ref, ASKS each).
The payload is `bench_daemon`'s. Interleaving is the caller's job: it sends one command
per round, between its own measurements.
"""

import asyncio
import json
import statistics
import sys
import time
from importlib.metadata import version

import xoscar as xo  # type: ignore[import-not-found]

PAYLOAD = {"payload": "x" * 32}


class Echo(xo.Actor):  # type: ignore[misc]
    async def echo(self, message: object) -> object:
        return message


async def main() -> None:
    pool = await xo.create_actor_pool("127.0.0.1", n_process=1)
    async with pool:
        ref = await xo.create_actor(
            Echo,
            address=pool.external_address,
            uid="echo",
            allocate_strategy=xo.allocate_strategy.ProcessIndex(1),
        )
        for _ in range(200):
            await ref.echo(PAYLOAD)
        print(json.dumps({"ready": version("xoscar")}), flush=True)
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            words = line.split()
            if not words:
                return
            if words[0] == "latency":
                samples = []
                for _ in range(int(words[1])):
                    t0 = time.perf_counter()
                    await ref.echo(PAYLOAD)
                    samples.append(time.perf_counter() - t0)
                print(json.dumps({"latency_s": statistics.median(samples)}), flush=True)
            elif words[0] == "rate":
                callers, asks = int(words[1]), int(words[2])

                async def caller(asks: int = asks) -> None:
                    for _ in range(asks):
                        await ref.echo(PAYLOAD)

                t0 = time.perf_counter()
                await asyncio.gather(*(caller() for _ in range(callers)))
                rate = callers * asks / (time.perf_counter() - t0)
                print(json.dumps({"rate": rate}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
