"""Agents shipped with qita: deterministic scripted agents for tests and demos, and an
optional adapter for OpenAI-compatible chat endpoints (never called in tests)."""

from .openai_compat import OpenAICompatAgent
from .scripted import ScriptedAgent, ScriptedState, SimulatedTools

__all__ = ["OpenAICompatAgent", "ScriptedAgent", "ScriptedState", "SimulatedTools"]
