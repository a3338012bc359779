"""phloem: a supervised, multi-process runtime for AI-agent workloads."""

from phloem.models.scripted import ScriptedModel
from phloem.protocols.content import Content, ModelRequest, ModelResponse, Part
from phloem.protocols.errors import ErrorValue, PhloemError
from phloem.protocols.model import Model, ModelError

__all__ = [
    "Content",
    "ErrorValue",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "Part",
    "PhloemError",
    "ScriptedModel",
]
__version__ = "0.1.0"
