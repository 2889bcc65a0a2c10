"""The run so far as success criteria see it: the tool calls dispatched, steps taken, the answer.

The engine appends to a `Trajectory` while the run goes; readers of recorded traces
build one from the recorded actions (`qita.live`), so live verdicts are computed by the
same criteria code either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from .task import Task


@dataclass
class ToolCall:
    """One dispatched tool call as the live-verdict watchers and criteria see it."""

    index: int  # 1-based across the run, so a trace reader can say "the 3rd tool call"
    step: int
    name: str
    args: Any
    result: Any = None
    status: str = "ok"
    error: Optional[str] = None


@dataclass
class Trajectory:
    """The run so far, as success criteria see it: tool calls, steps taken and the answer."""

    task: Optional[Task] = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    steps: int = 0
    final_result: Optional[Any] = None
    state: Any = None
