"""What one run of a catalogue agent adds to the tree's chain — the same for every surface.

`prepare(catalogue, target, ...)` gives a `RunPrep`: the agent to run and the run's own
interceptors, outermost first — the tool policy (the request's, and for each configured
LLM agent in the run, a planner's sub-agents included, its own `tools_allow` /
`tools_deny`; denials win), confirmation of mutating tool calls (for the agents with
`confirmation = true`, each with its own timeout; only when the run has an owner to ask,
`send`), the instructions of the agent's workspace (`instructions = true`) and, for an
agent that writes or edits files with language servers configured, the prompt's status
line (`LSP: none detected` / `LSP: ruff`, plasmid's) — plus its
prompt templates (`templates = true`: `/name args` expanded) and the warnings of all of
these. An agent object given directly (an embedded tree's own `Agent`) gets the request's
policy alone.

A session's turn passes a `SessionPlace`: the agent is then built anew from its spec as a
`ConversationAgent` on the session's workspace, and the session's instruction context and
its skill and template catalogs (snapshots kept across its turns) are used instead of
fresh ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from phloem.agents.agent import Agent
from phloem.agents.assembly import run_chain
from phloem.agents.catalogue import AgentCatalogue
from phloem.agents.llm_agent import LlmAgent
from phloem.instructions.confirm import ConfirmationInterceptor
from phloem.instructions.context import InstructionsInterceptor, run_interceptors
from phloem.instructions.discovery import InstructionContext
from phloem.instructions.policy import ToolPolicy
from phloem.instructions.skills import SkillCatalog
from phloem.instructions.templates import TemplateCatalog
from phloem.models.interceptors import CallInfo, Interceptor, Interceptors
from phloem.protocols.content import ModelRequest, ModelResponse
from phloem.protocols.runs import ConfirmRequest
from phloem.protocols.warnings import RunWarning, Warnings
from phloem.tools.contract import ToolContext


@dataclass(frozen=True)
class SessionPlace:
    """Where a session's turn runs: the session's tool context (workspace, session id,
    cancel, output budget) and its instruction context, kept across turns."""

    tool_context: ToolContext
    context: Callable[[], InstructionContext] | None = None
    variables: Mapping[str, Any] = field(default_factory=dict)
    # The session's skills and templates, snapshotted at its first turn (plasmid: each
    # session gets an immutable extension catalog), given this turn's warnings.
    skills: Callable[[Warnings], SkillCatalog] | None = None
    templates: Callable[[Warnings], TemplateCatalog] | None = None


class PromptStatus(Interceptor):
    """Adds a status line (`LSP: none detected`, `LSP: ruff`) to the end of every model
    request's system instruction, read afresh for each call (a server started by the
    last write shows at the next call)."""

    name = "prompt-status"

    def __init__(self, line: Callable[[], str | None]) -> None:
        self.line = line

    def model_call(
        self,
        info: CallInfo,
        request: ModelRequest,
        proceed: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        line = self.line()
        if line:
            own = request.system_instruction
            system = f"{own}\n\n{line}" if own else line
            request = msgspec.structs.replace(request, system_instruction=system)
        return proceed(request)


@dataclass
class RunPrep:
    """One run's agent and what it adds (see the module docstring). The instructions are
    discovered when the chain is first made (`chain`, in the run's own thread)."""

    agent: Agent
    policy: ToolPolicy | None = None
    by_agent: dict[str, ToolPolicy] = field(default_factory=dict)
    confirm: ConfirmationInterceptor | None = None
    context: Callable[[], InstructionContext] | None = None
    warnings: Warnings = field(default_factory=Warnings)
    templates: TemplateCatalog | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    status: Callable[[], str | None] | None = None  # the prompt's LSP line, if any

    def own(self) -> list[Interceptor]:
        """The run's own interceptors, outermost first: policy, confirmation, instructions,
        the prompt's status line."""
        context = self.context() if self.context is not None else None
        out = run_interceptors(
            policy=self.policy, context=context, confirmation=self.confirm, by_agent=self.by_agent
        )
        if self.status is not None:
            out.append(PromptStatus(self.status))
        return out

    def chain(self, tree: Interceptors, *inner: Interceptor) -> Interceptors:
        """The run's whole chain: its instructions and status line (what the built-ins add
        to a request, before any plugin sees it), the tree's, then its own (policy,
        confirmation), then `inner` (see `run_chain`)."""
        own = self.own()
        built_in = (InstructionsInterceptor, PromptStatus)
        first = [i for i in own if isinstance(i, built_in)]
        rest = [i for i in own if not isinstance(i, built_in)]
        return run_chain(tree, rest, *inner, first=first)

    def expand(self, prompt: str) -> str:
        """`/name args` expanded through the templates (other prompts unchanged); a
        template with `allowed-tools` narrows this run's policy to them."""
        if self.templates is None:
            return prompt
        template = self.templates.prompt_template(prompt)
        text = self.templates.expand_prompt(prompt, self.variables)
        if template is not None and template.allow is not None:
            narrowed = ToolPolicy(allow=template.allow)
            self.policy = narrowed if self.policy is None else self.policy.intersect(narrowed)
        return text

    def check(self, prompt: str) -> None:
        """`unknown_template` now when `prompt` is a command naming no template."""
        if self.templates is not None:
            self.templates.check_prompt(prompt)

    def drain(self) -> list[RunWarning]:
        return list(self.warnings.drain())

    def close(self, reason: str = "the run ended") -> None:
        """No more confirmations: waiting and later calls are refused."""
        if self.confirm is not None:
            self.confirm.close(reason)


def prepare(
    catalogue: AgentCatalogue,
    target: str | Agent,
    *,
    policy: ToolPolicy | None = None,
    send: Callable[[ConfirmRequest], None] | None = None,
    session: SessionPlace | None = None,
) -> RunPrep:
    """The `RunPrep` of one run of `target` (a catalogue name, or an agent object)."""
    policy = policy or ToolPolicy()
    if not isinstance(target, str):
        return RunPrep(target, _restricting(policy))
    warnings = Warnings()
    context: Callable[[], InstructionContext] | None = None
    if session is not None:
        session_spec = catalogue.llm_spec(target)
        if session_spec.instructions and session.context is not None:
            context = session.context
            warnings = context().warnings
        skills = session.skills(warnings) if session.skills and session_spec.skills else None
        agent: Agent = catalogue.build(
            session_spec,
            session.tool_context,
            conversation=True,
            warnings=warnings,
            skills=skills,
        )
    else:
        agent = catalogue.agent(target)
    by_agent: dict[str, ToolPolicy] = {}
    confirming: dict[str, float] = {}
    for name in llm_agent_names(agent):
        spec = catalogue.spec(name)
        if spec is None:
            continue
        own = ToolPolicy.of(spec.config.tools_allow, spec.config.tools_deny)
        if not own.unrestricted:
            by_agent[name] = own
        if spec.config.confirmation:
            confirming[name] = spec.config.confirmation_timeout_s
    top = catalogue.spec(target)
    workdir = _workdir(agent)
    templates = None
    if top is not None and workdir is not None:
        instructions = catalogue.assembly.instructions
        if top.instructions and context is None:
            root, found = workdir, warnings

            def discover() -> InstructionContext:
                return InstructionContext(root, config=instructions, warnings=found)

            context = discover

        if top.templates and session is not None and session.templates is not None:
            templates = session.templates(warnings)
        elif top.templates:
            templates = TemplateCatalog(
                instructions, workdir, warnings=warnings, tools=catalogue.assembly.tools_config
            )
    status = None
    if top is not None and workdir is not None and {"write", "edit"} & set(top.tools):
        root, assembly = workdir, catalogue.assembly
        if assembly.lsp_status(root) is not None:

            def status_line() -> str | None:
                return assembly.lsp_status(root)

            status = status_line
    confirm = None
    if confirming and send is not None:
        confirm = ConfirmationInterceptor(send, tools=tool_table(agent), agents=confirming)
    variables = dict(session.variables) if session is not None else {}
    return RunPrep(
        agent,
        _restricting(policy),
        by_agent,
        confirm,
        _once(context),
        warnings,
        templates,
        variables,
        status,
    )


def _once(
    make: Callable[[], InstructionContext] | None,
) -> Callable[[], InstructionContext] | None:
    """`make`, called at most once (a run's chain may be asked for more than once)."""
    if make is None:
        return None
    made: list[InstructionContext] = []

    def get() -> InstructionContext:
        if not made:
            made.append(make())
        return made[0]

    return get


def _restricting(policy: ToolPolicy) -> ToolPolicy | None:
    return None if policy.unrestricted else policy


def _workdir(agent: Agent) -> str | None:
    """The workspace root of an LLM agent's tools (None: it has none)."""
    if not isinstance(agent, LlmAgent) or not agent.tool_context.has_workspace:
        return None
    return str(agent.tool_context.workspace.root)


def llm_agent_names(agent: Agent) -> list[str]:
    """The names of the LLM agents in `agent`'s tree (itself included)."""
    names: list[str] = []
    stack = [agent]
    while stack:
        current = stack.pop()
        if isinstance(current, LlmAgent):
            names.append(current.name)
        stack.extend(current.sub_agents)
    return names


def tool_table(agent: Agent) -> Callable[[CallInfo, str], object | None]:
    """The lookup of a tool by (calling agent, tool name) over `agent`'s tree: an LLM
    agent's own tools, then its toolsets' tools of the moment (MCP tools; by the time
    one is called, its toolset has listed it)."""
    agents: dict[str, LlmAgent] = {}
    stack = [agent]
    while stack:
        current = stack.pop()
        if isinstance(current, LlmAgent):
            agents.setdefault(current.name, current)
        stack.extend(current.sub_agents)

    def lookup(info: CallInfo, name: str) -> object | None:
        owner = agents.get(info.agent)
        if owner is None:
            return None
        for tool in owner.tools:
            if tool.name == name:
                return tool
        for toolset in owner.toolsets:
            for tool in toolset.tools():
                if tool.name == name:
                    return tool
        return None

    return lookup
