"""Comparisons computed ahead of their first visitor.

Pairing thousands of runs and computing every figure with its interval takes the better
part of a second at 10,000 pairs (docs/performance.md); the result is cached until a run
changes (app.queries.cache.data_cached). This thread keeps that cache ready: when the store's
data version moves (after an ingest, an upload, a sweep) and has then stayed put for a
moment, it computes each experiment's default comparison and the comparisons visitors
asked for recently, so the compare page answers from the cache. It only reads.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any, Optional

from sqlalchemy.engine import Engine
from sqlmodel import Session

log = logging.getLogger("qita.warm")

#: Experiments whose default comparison is kept warm, and recent comparisons remembered.
MAX_EXPERIMENTS = 20
MAX_RECENT = 10


class Warmer:
    """Polls the data version; warms the comparisons once it has settled."""

    def __init__(self, engine: Engine, *, interval: float = 1.0):
        self.engine = engine
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="qita-warm", daemon=True)
        self._recent: "OrderedDict[tuple, None]" = OrderedDict()
        self._lock = threading.Lock()
        self.warmed = 0  # comparisons computed (for tests and the health page)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def asked(self, ga: Any, gb: Any, group: Optional[str]) -> None:
        """A visitor asked for this comparison: keep it warm from now on."""
        with self._lock:
            self._recent[(ga, gb, group)] = None
            self._recent.move_to_end((ga, gb, group))
            while len(self._recent) > MAX_RECENT:
                self._recent.popitem(last=False)

    def _loop(self) -> None:
        from . import stats
        from .queries.cache import data_version

        stats.warm()  # SciPy's import and first use, before any visitor compares

        done: Optional[tuple] = None
        seen: Optional[tuple] = None
        while not self._stop.wait(self.interval):
            try:
                with Session(self.engine) as session:
                    version = data_version(session)
                    # Settled: the same version twice in a row (an ingest in progress moves it).
                    if version == seen and version != done:
                        self.warm(session)
                        done = version
                    seen = version
            except Exception:  # warming is an optimisation: never let it fail loudly
                log.debug("warming the comparisons failed", exc_info=True)

    def warm(self, session: Session) -> int:
        """Compute the default comparison of each experiment and the recent ones."""
        from . import compare
        from .queries import comparison

        targets: list[tuple] = []
        for experiment, variants in list(comparison.variants_by_experiment(session).items())[:MAX_EXPERIMENTS]:
            pick = compare.choose_default({experiment: variants})
            if pick:
                e, va, vb = pick
                targets.append((compare.Group("variant", va, e), compare.Group("variant", vb, e), None))
        with self._lock:
            targets += [k for k in self._recent if k not in targets]
        n = 0
        for ga, gb, group in targets:
            if self._stop.is_set():
                break
            comparison.comparison(session, ga, gb, group=group, limit=0)
            n += 1
        self.warmed += n
        return n
