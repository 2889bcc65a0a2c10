"""The run loop and its contracts: `Engine`, critics, stop criteria.

The modules mirror QitOS (`qita.engine.engine`, `qita.engine.critic`,
`qita.engine.stop_criteria`), so code written against QitOS imports them with only
`qitos` replaced by `qita`. `from qita.engine import Engine, RunResult` keeps working:
those names load on first use (PEP 562), so importing one contract (the board imports
`qita.engine.critic`) does not load the run loop (see qita/__init__.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

#: Where each name lives, relative to this package.
_HOMES = {
    "DEFAULT_MAX_STEPS": ".engine",
    "Engine": ".engine",
    "coerce_task": ".engine",
    "RunResult": ".result",
    "Stop": ".result",
}

if TYPE_CHECKING:
    from .engine import DEFAULT_MAX_STEPS, Engine, coerce_task
    from .result import RunResult, Stop


__getattr__, __dir__ = lazy_names(globals(), _HOMES)


__all__ = ["DEFAULT_MAX_STEPS", "Engine", "RunResult", "Stop", "coerce_task"]
