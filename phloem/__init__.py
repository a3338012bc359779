"""phloem: a supervised, multi-process runtime for AI-agent workloads."""

from phloem.client import AsyncClient, Client
from phloem.models.scripted import ScriptedModel
from phloem.protocols.content import Content, ModelRequest, ModelResponse, Part
from phloem.protocols.errors import ErrorValue, PhloemError
from phloem.protocols.model import Model, ModelError
from phloem.supervision.credit import CreditWindow
from phloem.tree import Tree

__all__ = [
    "AsyncClient",
    "Client",
    "Content",
    "CreditWindow",
    "ErrorValue",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "Part",
    "PhloemError",
    "ScriptedModel",
    "Tree",
]
__version__ = "0.1.0"
