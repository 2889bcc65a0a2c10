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
    #: the exit code when the caller knows it (a recorded trace); otherwise read from the result
    exit_code: Optional[int] = None

    @property
    def succeeded(self) -> bool:
        """Ran without an error and, when an exit code is known, exited 0."""
        if self.status != "ok" or self.error:
            return False
        code = self.exit_code if self.exit_code is not None else result_exit_code(self.result)
        return code in (None, 0)


def result_exit_code(result: Any) -> Optional[int]:
    """The exit code a tool result reports (`returncode` or `exit_code`), if it is a whole number."""
    if isinstance(result, dict):
        for key in ("returncode", "exit_code"):
            code = result.get(key)
            if isinstance(code, int) and not isinstance(code, bool):
                return code
    return None


@dataclass
class Trajectory:
    """The run so far, as success criteria see it: tool calls, steps taken and the answer."""

    task: Optional[Task] = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    steps: int = 0
    final_result: Optional[Any] = None
    state: Any = None
    #: per-criterion progress over `tool_calls`, so a live verdict re-reads only the calls
    #: appended since it last looked (criteria own the entries; see `qita.criteria`)
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
