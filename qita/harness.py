"""Model-family presets: advisory defaults a harness can apply per model family.

The values are deliberately conservative advice, not limits the engine enforces; a
caller turns them into criteria (e.g. `MaxTokensCriteria(preset.recommended_max_tokens or N)`).
An unknown family gets a preset with every recommendation left as None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class FamilyPreset:
    family: str
    recommended_max_tokens: Optional[int] = None
    recommended_max_steps: Optional[int] = None
    context_window: Optional[int] = None


_PRESETS = {
    "qwen": FamilyPreset("qwen", recommended_max_tokens=262_144, recommended_max_steps=30, context_window=131_072),
    "llama": FamilyPreset("llama", recommended_max_tokens=131_072, recommended_max_steps=25, context_window=131_072),
    "gpt": FamilyPreset("gpt", recommended_max_tokens=400_000, recommended_max_steps=40, context_window=128_000),
    "claude": FamilyPreset("claude", recommended_max_tokens=500_000, recommended_max_steps=40,
                           context_window=200_000),
}


def resolve_family_preset(family: str) -> FamilyPreset:
    """The preset for a model family name or a model id starting with it (`"qwen2.5-7b"` -> qwen)."""
    key = (family or "").strip().lower()
    for name, preset in _PRESETS.items():
        if key == name or key.startswith(name):
            return preset
    return FamilyPreset(family=key or "unknown")
