"""Planners that shape model requests and responses (adk-python's BuiltIn / PlanReAct).

Not to be confused with the agent planners of `phloem.agents` (which pick the next
sub-agent): these act on one model call. An `LlmAgent` holding a `RequestPlanner` calls
`planner.build_request(request)` before each model call and
`planner.process_response(response)` on each answer.

- `BuiltInPlanner(thinking_config)` lets the model think natively: it sets the request's
  thinking config (replacing any from the generate config) and leaves answers unchanged.
- `PlanReActPlanner` asks the model to plan, act and answer under fixed tags, and turns
  the planning and reasoning text into thought parts.

Both clear the thought flag on every part of the history they resend, so earlier
planning reaches the model as ordinary text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol, runtime_checkable

import msgspec

from phloem.protocols.content import (
    Content,
    ModelRequest,
    ModelResponse,
    Part,
    ThinkingConfig,
)

PLANNING_TAG: Final = "/*PLANNING*/"
REPLANNING_TAG: Final = "/*REPLANNING*/"
REASONING_TAG: Final = "/*REASONING*/"
ACTION_TAG: Final = "/*ACTION*/"
FINAL_ANSWER_TAG: Final = "/*FINAL_ANSWER*/"
_THOUGHT_OPENERS: Final = (PLANNING_TAG, REASONING_TAG, ACTION_TAG, REPLANNING_TAG)
_ALL_TAGS: Final = (*_THOUGHT_OPENERS, FINAL_ANSWER_TAG)


@runtime_checkable
class RequestPlanner(Protocol):
    """What an agent needs from a request planner."""

    def build_planning_instruction(self, request: ModelRequest) -> str | None:
        """Text to append to the system instruction, or None."""
        ...

    def process_planning_response(self, parts: Sequence[Part]) -> tuple[Part, ...] | None:
        """Replacement parts for an answer, or None to keep them."""
        ...

    def build_request(self, request: ModelRequest) -> ModelRequest:
        """The request to send instead of `request`."""
        ...

    def process_response(self, response: ModelResponse) -> ModelResponse:
        """The answer to use instead of `response`."""
        ...


def clear_thoughts(contents: Sequence[Content]) -> tuple[Content, ...]:
    """The history with every `thought` flag cleared (text, signatures kept)."""
    out: list[Content] = []
    for content in contents:
        if any(p.thought for p in content.parts):
            parts = tuple(
                msgspec.structs.replace(p, thought=False) if p.thought else p for p in content.parts
            )
            out.append(Content(role=content.role, parts=parts))
        else:
            out.append(content)
    return tuple(out)


def append_instruction(request: ModelRequest, text: str) -> ModelRequest:
    system = f"{request.system_instruction}\n\n{text}" if request.system_instruction else text
    return msgspec.structs.replace(request, system_instruction=system)


class _Base:
    def build_planning_instruction(self, request: ModelRequest) -> str | None:
        return None

    def process_planning_response(self, parts: Sequence[Part]) -> tuple[Part, ...] | None:
        return None

    def _prepare(self, request: ModelRequest) -> ModelRequest:
        return request

    def build_request(self, request: ModelRequest) -> ModelRequest:
        request = self._prepare(request)
        instruction = self.build_planning_instruction(request)
        if instruction:
            request = append_instruction(request, instruction)
        return msgspec.structs.replace(request, contents=clear_thoughts(request.contents))

    def process_response(self, response: ModelResponse) -> ModelResponse:
        if response.content is None or not response.content.parts:
            return response
        parts = self.process_planning_response(response.content.parts)
        if parts is None:
            return response
        return msgspec.structs.replace(
            response, content=Content(role=response.content.role, parts=parts)
        )


class BuiltInPlanner(_Base):
    """Use the model's native thinking, configured by `thinking_config`."""

    def __init__(self, thinking_config: ThinkingConfig) -> None:
        if not isinstance(thinking_config, ThinkingConfig):
            raise TypeError("thinking_config must be a ThinkingConfig")
        self.thinking_config = thinking_config

    def _prepare(self, request: ModelRequest) -> ModelRequest:
        config = msgspec.structs.replace(request.config, thinking_config=self.thinking_config)
        return msgspec.structs.replace(request, config=config)

    def __repr__(self) -> str:
        return f"BuiltInPlanner({self.thinking_config!r})"


PLAN_REACT_INSTRUCTION: Final = f"""\
Work in three stages and mark each with its tag.

1. Plan. Before anything else, write a short numbered plan for answering the question \
with the tools you have, under {PLANNING_TAG}.
2. Act. Carry the plan out step by step. Before each tool call, explain under \
{REASONING_TAG} what you are about to do and why, then put the call itself under \
{ACTION_TAG}. Look at every tool result before the next step. If a result shows the plan \
will not work, write a corrected plan under {REPLANNING_TAG} and continue with that one.
3. Answer. When you have what you need, write the final answer under {FINAL_ANSWER_TAG}. \
The final answer stands on its own: state it plainly and do not repeat the plan.

Call only tools that are available to you. If a question needs no tools, a one-step plan \
and a final answer are enough. If the question cannot be answered with what you have, say \
so under {FINAL_ANSWER_TAG}."""


def _strip_tags(text: str) -> str:
    for tag in _ALL_TAGS:
        text = text.replace(tag, "")
    return text.strip()


class PlanReActPlanner(_Base):
    """Plan, then act with interleaved reasoning, then answer — under fixed tags."""

    def build_planning_instruction(self, request: ModelRequest) -> str | None:
        return PLAN_REACT_INSTRUCTION

    def process_planning_response(self, parts: Sequence[Part]) -> tuple[Part, ...] | None:
        """Split an answer into thought and non-thought parts:

        - function calls with an empty name are dropped;
        - at the first named call, keep it and every call immediately after it, and drop
          everything after that group;
        - a text holding the final-answer tag is split at its last occurrence: the left
          side (tags removed) becomes a thought, the right side stays plain text;
        - a text starting with the planning, reasoning, action or replanning tag becomes
          a thought with its tags removed; anything else passes through.
        """
        if not parts:
            return None
        kept: list[Part] = []
        index = 0
        while index < len(parts):
            part = parts[index]
            call = part.function_call
            if call is not None:
                if not call.name:
                    index += 1
                    continue
                kept.append(part)
                index += 1
                while index < len(parts) and parts[index].function_call is not None:
                    follower = parts[index].function_call
                    if follower is not None and follower.name:
                        kept.append(parts[index])
                    index += 1
                break
            kept.extend(self._split_text(part))
            index += 1
        return tuple(kept)

    @staticmethod
    def _split_text(part: Part) -> list[Part]:
        text = part.text
        if text is None or part.thought:
            return [part]
        if FINAL_ANSWER_TAG in text:
            cut = text.rfind(FINAL_ANSWER_TAG)
            reasoning = _strip_tags(text[:cut])
            answer = text[cut + len(FINAL_ANSWER_TAG) :]
            out: list[Part] = []
            if reasoning:
                out.append(Part.from_thought(reasoning))
            if answer.strip():
                out.append(Part.from_text(answer.strip()))
            return out
        if text.startswith(_THOUGHT_OPENERS):
            return [Part.from_thought(_strip_tags(text), signature=part.thought_signature)]
        return [part]

    def __repr__(self) -> str:
        return "PlanReActPlanner()"
