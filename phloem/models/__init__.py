"""Model providers: Gemini REST and OpenAI (Chat Completions, Responses) over httpx, the
scripted test double, providers by configured name, one-shot runs and the probe, and the
request planners (BuiltIn, PlanReAct)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from phloem.protocols.exports import lazy_exports

if TYPE_CHECKING:
    from phloem.models.gemini import (
        GeminiModel as GeminiModel,
    )
    from phloem.models.oneshot import (
        ONE_SHOT_KINDS as ONE_SHOT_KINDS,
        OneShotResult as OneShotResult,
        probe as probe,
        run as run,
    )
    from phloem.models.openai import (
        OpenAIConfig as OpenAIConfig,
        OpenAIModel as OpenAIModel,
    )
    from phloem.models.providers import (
        ProviderConfig as ProviderConfig,
        ProviderRegistry as ProviderRegistry,
        build_model as build_model,
        load_providers as load_providers,
    )
    from phloem.models.request_planners import (
        BuiltInPlanner as BuiltInPlanner,
        PlanReActPlanner as PlanReActPlanner,
        RequestPlanner as RequestPlanner,
    )
    from phloem.models.scripted import (
        ScriptedModel as ScriptedModel,
    )

_EXPORTS: dict[str, str] = {
    "BuiltInPlanner": "phloem.models.request_planners",
    "GeminiModel": "phloem.models.gemini",
    "ONE_SHOT_KINDS": "phloem.models.oneshot",
    "OneShotResult": "phloem.models.oneshot",
    "OpenAIConfig": "phloem.models.openai",
    "OpenAIModel": "phloem.models.openai",
    "PlanReActPlanner": "phloem.models.request_planners",
    "ProviderConfig": "phloem.models.providers",
    "ProviderRegistry": "phloem.models.providers",
    "RequestPlanner": "phloem.models.request_planners",
    "ScriptedModel": "phloem.models.scripted",
    "build_model": "phloem.models.providers",
    "load_providers": "phloem.models.providers",
    "probe": "phloem.models.oneshot",
    "run": "phloem.models.oneshot",
}

__all__ = sorted(_EXPORTS)  # noqa: PLE0605 (the one export table)

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
