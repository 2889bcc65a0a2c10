"""The run loop and its contracts: `Engine`, critics, stop criteria.

The modules mirror QitOS (`qita.engine.engine`, `qita.engine.critic`,
`qita.engine.stop_criteria`), so code written against QitOS imports them with only
`qitos` replaced by `qita`. `from qita.engine import Engine, RunResult` keeps working.
"""

from .engine import DEFAULT_MAX_STEPS, Engine, coerce_task
from .result import RunResult, Stop

__all__ = ["DEFAULT_MAX_STEPS", "Engine", "RunResult", "Stop", "coerce_task"]
