"""Model providers: the scripted test double, Gemini and OpenAI over HTTP, one-shot runs."""

from phloem.models.scripted import ScriptedModel

__all__ = ["ScriptedModel"]
