"""Scripted planner and executor adapters for the planning tests.

They run in real callback children, so their behaviour is chosen by data: the planner by
its request `target` (`{"plan": ..., "review": ...}`), the executor by each step's
action (`{"op": ...}`).
"""

from __future__ import annotations

import os
import time
from typing import Any

from phloem.protocols.plan import Plan, Step
from phloem.protocols.result import Complete, Continue, Error, Fail, Ok, Replan


def _steps(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"id": f"s{i}", "description": f"step {i}", "action": a} for i, a in enumerate(actions, 1)
    ]


def _doc(goal: Any, revision: int, actions: list[dict[str, Any]], pid: str = "p") -> Any:
    return {"id": pid, "revision": revision, "goal": goal, "steps": _steps(actions)}


class ScriptedPlanner:
    def plan(self, target: Any, goal: Any, context: Any, config: Any) -> Any:
        target = target or {}
        mode = target.get("plan", "steps")
        actions = target.get("steps", [{"op": "echo", "value": 1}])
        if mode == "steps":
            return Ok(_doc(goal, 0, actions))
        if mode == "struct":
            steps = [Step(s["id"], s["description"], s["action"]) for s in _steps(actions)]
            return Ok(Plan.new("p", 0, goal, steps, {"via": "struct"}))
        if mode == "complete":
            return Complete({"done": True, "api_key": "sk-secret", "context": context})
        if mode == "error":
            return Error({"why": "cannot plan", "password": "hunter2"})
        if mode == "crash":
            raise RuntimeError("planner exploded with api_key=sk-abcdefghijklmnopqrstu")
        if mode == "sleep":
            time.sleep(30)
        if mode == "invalid":
            return "not an outcome"
        if mode == "opaque":
            return Ok({"id": "p", "revision": 0, "goal": goal, "steps": [print]})
        if mode == "revision1":
            return Ok(_doc(goal, 1, actions))
        if mode == "other_goal":
            return Ok(_doc({"other": True}, 0, actions))
        if mode == "dup_ids":
            doc = _doc(goal, 0, actions + actions)
            for step in doc["steps"]:
                step["id"] = "same"
            return Ok(doc)
        if mode == "hog":
            hog = bytearray(1024 * 1024 * 1024)
            return Ok(len(hog))
        if mode == "fork_hogs":  # helpers each under the cap, together far over it
            # the helpers fill their memory once the pids are reported: the watchdog
            # cannot end the tree before the test knows whom to look for
            gate, go = os.pipe()
            pids = [_fork_holding(target["size"], gate, go) for _ in range(target["helpers"])]
            os.close(gate)
            if target.get("fifo"):
                _report(target["fifo"], " ".join(map(str, pids)))
            os.close(go)
            time.sleep(target.get("hold_s", 3))
            return Ok(_doc(goal, 0, actions))
        if mode == "report_and_sleep":  # until killed; with `flag`, only while it is absent
            if target.get("asks"):  # one line per time this planner is asked
                with open(target["asks"], "a") as fh:
                    fh.write(f"{os.getpid()}\n")
            flag = target.get("flag")
            if flag is None or not os.path.exists(flag):
                if flag is not None:
                    open(flag, "w").close()
                _report(target["fifo"], str(os.getpid()))
                time.sleep(30)
            return Ok(_doc(goal, 0, actions))
        if mode == "burst_hogs":  # helpers that all fill their memory at once, at speed
            _report(target["fifo"], str(os.getpid()))
            gate, go = os.pipe()
            for _ in range(target["helpers"]):
                _fork_holding(target["size"], gate, go, chunk=target["chunk"])
            os.close(gate)
            os.close(go)
            time.sleep(target.get("hold_s", 30))
            return Ok(_doc(goal, 0, actions))
        raise ValueError(f"unknown plan mode {mode}")

    def review(
        self,
        target: Any,
        plan: Plan,
        step: Step,
        observation: dict[str, Any],
        context: Any,
        config: Any,
    ) -> Any:
        target = target or {}
        mode = target.get("review", "continue")
        assert isinstance(plan, Plan) and isinstance(step, Step)
        if mode == "continue":
            return Continue()
        if mode == "replan_on_error":
            if observation["status"] == "error":
                new = _doc(plan.goal, plan.revision + 1, target["recovery"], plan.id)
                return Replan(new)
            return Continue()
        if mode == "always_replan":
            return Replan(_doc(plan.goal, plan.revision + 1, target["steps"], plan.id))
        if mode == "replan_skip_revision":
            return Replan(_doc(plan.goal, plan.revision + 2, target["steps"], plan.id))
        if mode == "replan_other_id":
            return Replan(_doc(plan.goal, plan.revision + 1, target["steps"], "other"))
        if mode == "replan_other_goal":
            return Replan(_doc({"changed": 1}, plan.revision + 1, target["steps"], plan.id))
        if mode == "replan_opaque":
            return Replan({"id": plan.id, "goal": plan.goal, "steps": {1, 2}})
        if mode == "complete":
            return Complete({"last": observation.get("output")})
        if mode == "complete_opaque":
            return Complete(object())
        if mode == "fail":
            return Fail({"because": "reviewer said so"})
        if mode == "crash":
            raise RuntimeError("review exploded")
        if mode == "invalid":
            return {"decision": "continue"}
        if mode == "sleep":
            time.sleep(30)
        raise ValueError(f"unknown review mode {mode}")


class ScriptedExecutor:
    def execute(self, target: Any, step: Step, context: Any, config: Any) -> Any:
        action = step.action
        op = action.get("op")
        if op == "echo":
            return Ok({"step": step.id, "action": action, "context": context, "config": config})
        if op == "fail":
            return Error({"why": action.get("why", "boom"), "token": "t0ken"})
        if op == "crash":
            raise RuntimeError("executor exploded")
        if op == "invalid":
            return "just a string"
        if op == "opaque":
            return Ok({"callable": print})
        if op == "sleep":
            if action.get("fifo"):
                _report(action["fifo"], str(os.getpid()))
            time.sleep(action.get("s", 30))
            return Ok("slept")
        if op == "big":
            return Ok("x" * int(action["n"]))
        if op == "hog":
            hog = [bytearray(64 * 1024 * 1024) for _ in range(64)]
            return Ok(len(hog))
        if op == "fork_hang":
            pid = os.fork()
            if pid == 0:
                try:
                    time.sleep(60)
                finally:
                    os._exit(0)
            _report(action["fifo"], f"{os.getpid()} {pid}")
            time.sleep(60)
            return Ok("never")
        raise ValueError(f"unknown op {op}")


def _fork_holding(size: int, gate: int, go: int, chunk: int = 4 * 1024 * 1024) -> int:
    """Fork a helper that waits for end-of-file on `gate` (the parent closes `go`), makes
    `size` bytes resident and then sleeps; its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            os.close(go)
            os.read(gate, 1)
            held = fill(size, chunk)
            time.sleep(60)
            del held
        finally:
            os._exit(0)
    return pid


def fill(size: int, chunk: int) -> list[bytearray]:
    """Make `size` bytes resident in blocks of `chunk`, as fast as it goes. A block the
    address-space budget refuses (`MemoryError`) is asked for again a moment later, as a
    hungry program would: the tree's cap ends it, not the helper giving up."""
    blocks: list[bytearray] = []
    while len(blocks) * chunk < size:
        try:
            block = bytearray(chunk)
        except MemoryError:
            time.sleep(0.005)
            continue
        block[::4096] = b"\1" * len(range(0, chunk, 4096))
        blocks.append(block)
    return blocks


def _report(fifo: str, text: str) -> None:
    with open(fifo, "w") as fh:
        fh.write(text + "\n")


class NotAPlanner:
    def execute(self, target: Any, step: Step, context: Any, config: Any) -> Any:
        return Ok(None)
