"""Model providers: Gemini REST and OpenAI (Chat Completions, Responses) over httpx, the
scripted test double, providers by configured name, one-shot runs and the probe, and the
request planners (BuiltIn, PlanReAct)."""

from phloem.models.gemini import GeminiModel
from phloem.models.oneshot import (
    ONE_SHOT_KINDS,
    OneShotResult,
    probe,
    run,
)
from phloem.models.openai import OpenAIConfig, OpenAIModel
from phloem.models.providers import (
    ProviderConfig,
    ProviderRegistry,
    build_model,
    load_providers,
)
from phloem.models.request_planners import BuiltInPlanner, PlanReActPlanner, RequestPlanner
from phloem.models.scripted import ScriptedModel

__all__ = [
    "ONE_SHOT_KINDS",
    "BuiltInPlanner",
    "GeminiModel",
    "OneShotResult",
    "OpenAIConfig",
    "OpenAIModel",
    "PlanReActPlanner",
    "ProviderConfig",
    "ProviderRegistry",
    "RequestPlanner",
    "ScriptedModel",
    "build_model",
    "load_providers",
    "probe",
    "run",
]
