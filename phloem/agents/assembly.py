"""The one tool assembly: the tools of any run, made from what its agent names.

Every surface that gives tools to a model gets them here — agent runs, session turns, eval
cases, Live sessions, `phloem mcp serve` and `tree.tool_registry()` — so one config gives
one set of tools everywhere, under the same names:

- the coding tools (read, write, edit, bash, grep, find, ls) with the `[tools]` limits,
  `write` and `edit` decorated with language-server diagnostics when `[lsp]` has servers;
- `[components]` entries named as tools (a `Tool`, or a callable made a `FunctionTool`),
  loaded (trusted code, named in the config) when a run first names them;
- the tools of MCP servers (`mcp_servers`; None: every configured server), found at each
  run from the tree's MCP hub, which connects a server at that first need;
- `list_skills` / `load_skill` over the workspace's skills, when the agent has `skills`;
- one tool per agent of the catalogue it delegates to (`agents`), named after the agent:
  a call runs that agent as a run of its own (`phloem.agents.delegation`).

The run's interceptors wrap the calls of all of them in one order (`run_chain`): the run's
instructions first (so a plugin's additions to a request come after the built-in
instructions), the tree's chain (telemetry, then the tree-wide plugins), then the run's
own — tool policy, confirmation — then whatever the run adds inside (compaction, usage).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from phloem.agents.delegation import AgentTool, Delegate
from phloem.agents.settings import CODING_TOOLS, LlmAgentSpec
from phloem.instructions.settings import InstructionsConfig
from phloem.instructions.skills import SkillCatalog, skill_tools
from phloem.models.interceptors import Interceptor, Interceptors
from phloem.protocols.warnings import Warnings
from phloem.tools.contract import FunctionTool, Tool
from phloem.tools.registry import ToolRegistry, coding_tools
from phloem.tools.settings import ToolsConfig
from phloem.tools.toolset import SourceToolset, ToolDecorator, Toolset, ToolSource

MCP_TOOLSET_KIND = "mcp"


@dataclass(frozen=True, slots=True)
class AssembledTools:
    """The tools of one agent on one workspace: fixed tools, and toolsets asked per run."""

    tools: tuple[Tool, ...]
    toolsets: tuple[Toolset, ...]

    def names(self) -> list[str]:
        """Every tool's name, the toolsets' of this moment included (connects them)."""
        names = [tool.name for tool in self.tools]
        for toolset in self.toolsets:
            names.extend(tool.name for tool in toolset.tools() if tool.name not in names)
        return names


class ToolAssembly:
    """Makes the tools of a run (see the module docstring). `mcp` and `lsp` are read when
    tools are made, so a tree's hubs (set before its services start) are the ones used."""

    def __init__(
        self,
        *,
        tools_config: ToolsConfig | None = None,
        components: Mapping[str, str] | None = None,
        load: Callable[[str], Any] | None = None,
        mcp: Callable[[], ToolSource | None] = lambda: None,
        mcp_servers: Collection[str] = (),
        lsp: Callable[[], ToolDecorator | None] = lambda: None,
        instructions: InstructionsConfig | None = None,
        delegate: Callable[[], Delegate | None] = lambda: None,
        agent_descriptions: Mapping[str, str] | None = None,
    ) -> None:
        self.tools_config = tools_config
        self._components = dict(components or {})
        self._load = load
        self._mcp = mcp
        self.mcp_servers = tuple(mcp_servers)
        self._lsp = lsp
        self.instructions = instructions or InstructionsConfig()
        self._delegate = delegate
        self._descriptions = dict(agent_descriptions or {})

    # -- by kind ------------------------------------------------------------------------

    def coding(self) -> dict[str, Tool]:
        """Fresh coding tools by name, decorated with diagnostics when `[lsp]` is on."""
        lsp = self._lsp()
        tools = coding_tools(self.tools_config)
        return {t.name: (lsp.decorate(t) if lsp is not None else t) for t in tools}

    def lsp_status(self, workdir: str) -> str | None:
        """The LSP line of a prompt on `workdir` (None: no language servers configured)."""
        lsp = self._lsp()
        return lsp.status(workdir) if lsp is not None else None

    def known(self) -> list[str]:
        """Every name `named` accepts: the coding tools, then the components."""
        return [*CODING_TOOLS, *(n for n in self._components if n not in CODING_TOOLS)]

    def named(self, names: Sequence[str]) -> list[Tool]:
        """The tools called `names`, in that order, without repeats; an unknown name is a
        `ValueError` naming what is known."""
        coding = self.coding() if any(n in CODING_TOOLS for n in names) else {}
        out: list[Tool] = []
        for name in dict.fromkeys(names):
            if name in coding:
                out.append(coding[name])
            elif name in self._components:
                out.append(self._component(name))
            else:
                raise ValueError(f"unknown tool {name!r} (known: {', '.join(self.known())})")
        return out

    def is_component(self, name: str) -> bool:
        """Is `name` a `[components]` tool (not a coding tool)?"""
        return name in self._components and name not in CODING_TOOLS

    def _component(self, name: str) -> Tool:
        path = self._components[name]
        if self._load is None:
            raise ValueError(f"component {name!r} cannot be loaded here")
        target = self._load(path)
        if isinstance(target, Tool):
            if target.name != name:
                raise ValueError(f"component {name!r} is a Tool named {target.name!r}")
            return target
        if callable(target):
            return FunctionTool(name, target, inspect.getdoc(target) or "")
        raise ValueError(f"component {name!r} is neither a Tool nor a callable")

    def mcp_toolsets(self, servers: Sequence[str] | None) -> list[Toolset]:
        """The toolset of the named MCP servers (None: every configured one); none when
        the tree has no MCP servers. An unconfigured name is a `ValueError`."""
        if servers is None:
            servers = self.mcp_servers
        unknown = [name for name in servers if name not in self.mcp_servers]
        if unknown:
            raise ValueError(
                f"no MCP server named {unknown[0]!r} (configured: "
                f"{', '.join(self.mcp_servers) or 'none'})"
            )
        if not servers:
            return []
        return [SourceToolset(MCP_TOOLSET_KIND, self._mcp, list(servers))]

    def agents(self, names: Sequence[str]) -> list[Tool]:
        """A delegation tool per agent in `names` (checked against the catalogue by the
        config; a name gone since answers its calls with `agent_failed`)."""
        return [
            AgentTool(name, self._delegate, self._descriptions.get(name, ""))
            for name in dict.fromkeys(names)
        ]

    def skill_catalog(self, workdir: str, warnings: Warnings | None = None) -> SkillCatalog:
        """The skills of `workdir` as of now (a snapshot)."""
        return SkillCatalog(self.instructions, workdir, warnings=warnings, tools=self.tools_config)

    def skills(self, workdir: str, warnings: Warnings | None = None) -> list[Tool]:
        """The skill tools over `workdir`'s skills (none without skills)."""
        return skill_tools(self.skill_catalog(workdir, warnings))

    # -- for an agent -------------------------------------------------------------------

    def for_agent(
        self,
        spec: LlmAgentSpec,
        workdir: str | None,
        warnings: Warnings | None = None,
        skills: SkillCatalog | None = None,
    ) -> AssembledTools:
        """The tools `spec` names, on `workdir` (None: an agent with no workspace tools);
        `skills` is a catalog already taken (a session's snapshot), else one is read."""
        tools = self.named(spec.tools) + self.agents(spec.config.agents)
        if spec.skills and skills is not None:
            tools += skill_tools(skills)
        elif spec.skills and workdir is not None:
            tools += self.skills(workdir, warnings)
        return AssembledTools(tuple(tools), tuple(self.mcp_toolsets(spec.mcp_servers)))

    def registry(self, names: Sequence[str] | None = None, *, mcp: bool = False) -> ToolRegistry:
        """A registry of the named tools (None: the coding tools), then, with `mcp`, every
        configured MCP server's tools (connecting them: a tool need)."""
        tools = self.named(CODING_TOOLS if names is None else names)
        if mcp:
            for toolset in self.mcp_toolsets(None):
                tools.extend(toolset.tools())
        return ToolRegistry(tools)


def run_chain(
    tree: Interceptors,
    own: Sequence[Interceptor],
    *inner: Interceptor,
    first: Sequence[Interceptor] = (),
) -> Interceptors:
    """The interceptors of one run, outermost first: `first` (the run's instructions, so
    that what the tree's plugins add to a request comes after the built-in instructions,
    as plasmid orders them), the tree's chain (telemetry, plugins), the run's own (tool
    policy, confirmation), then `inner` (compaction, usage metering: what sees the
    request last)."""
    if not own and not inner and not first:
        return tree
    return Interceptors((*first, *tree.items, *own, *inner))
