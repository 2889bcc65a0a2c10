"""The policy lab's state in the store: computed once per finished run, off the ingest path.

A run is *pending* when it is finished and has no `lab_runs` row, or its row was
computed from an older state of the run (`lab_runs.run_updated_at` is not the run's
`updated_at`: every write to a run moves it). Pending runs are read in batches (their
criteria specs and step records, a few queries per batch), turned into `app.lab.state`
by `qita.live`, and written in one small transaction per batch.

Who indexes:
- on the board, `LabIndexer`, a background thread like `app.warm`: once the store has
  settled (the data version unchanged for a few seconds, so it never competes with an
  ingest or an upload in progress) it indexes every pending run, writing through the
  board's single writer (`app.jobs.Writer`) and resting as long as it worked between
  batches (at most half of one core); the sets a lab visitor is waiting for are indexed
  at once;
- from the command line, `qita whatif` indexes the runs it needs before it answers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Any, Callable, Optional

import orjson
from sqlalchemy import and_, delete, func, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

from ..criteria import gate_threshold_of
from ..jsontext import column_value
from ..models import CRITERIA, LAB_DECISIONS, LAB_RUNS, RUNS, STEPS
from ..queries.comparison import rows_of
from .state import RunState, pack_series, run_state

log = logging.getLogger("qita.lab")

BATCH_RUNS = 100
#: how long a batch waits for the board's writer (an upload can hold it a while)
WRITE_TIMEOUT_S = 300.0


def pending_condition() -> Any:
    """Finished runs whose lab state is missing or older than the run."""
    return and_(RUNS.c.state == "finished",
                (LAB_RUNS.c.run_pk.is_(None)) | LAB_RUNS.c.run_updated_at.is_distinct_from(RUNS.c.updated_at))


def _pending_from() -> Any:
    return RUNS.outerjoin(LAB_RUNS, LAB_RUNS.c.run_pk == RUNS.c.id)


def pending_count(session: Session, *, where: Optional[list[Any]] = None) -> int:
    """How many finished runs (of the set `where`, else of the store) still need indexing."""
    stmt = select(func.count()).select_from(_pending_from()).where(pending_condition(), *(where or []))
    return int(session.execute(stmt).scalar_one())


def pending_pks(session: Session, *, limit: int, where: Optional[list[Any]] = None, after: int = 0) -> list[int]:
    """The next pending runs in store order, after run key `after` (a pass walks the store once)."""
    stmt = (select(RUNS.c.id).select_from(_pending_from()).where(pending_condition(), RUNS.c.id > after, *(where or []))
            .order_by(RUNS.c.id).limit(limit))
    return [pk for (pk,) in session.execute(stmt)]


def compute(session: Session, pks: list[int]) -> list[tuple[int, Any, RunState]]:
    """The lab state of runs `pks`: (run pk, the `updated_at` it was computed from, state).
    Three queries for the batch: the runs, their criteria specs, their steps in order."""
    if not pks:
        return []
    runs = session.execute(select(RUNS.c.id, RUNS.c.updated_at, RUNS.c.start_record).where(RUNS.c.id.in_(pks))).all()
    specs: dict[int, list[dict[str, Any]]] = {}
    for r in rows_of(session, select(CRITERIA.c.run_pk, CRITERIA.c.spec).where(
            CRITERIA.c.run_pk.in_(pks), CRITERIA.c.has_spec.is_(True))
            .order_by(CRITERIA.c.run_pk, CRITERIA.c.position, CRITERIA.c.id)):
        spec = column_value(r["spec"])
        if isinstance(spec, dict):
            specs.setdefault(r["run_pk"], []).append(spec)
    steps: dict[int, list[dict[str, Any]]] = {}
    for r in rows_of(session, select(STEPS.c.run_pk, STEPS.c.step, STEPS.c.tokens_total, STEPS.c.duration_s,
                                     STEPS.c.cost_usd, STEPS.c.record)
                     .where(STEPS.c.run_pk.in_(pks)).order_by(STEPS.c.run_pk, STEPS.c.step)):
        try:
            r["record"] = orjson.loads(r["record"]) if r["record"] else {}
        except orjson.JSONDecodeError:
            r["record"] = {}
        steps.setdefault(r["run_pk"], []).append(r)
    out = []
    for pk, updated_at, start in runs:
        budget = (start or {}).get("budget") if isinstance(start, dict) else None
        counted = budget.get("tokens_counted") if isinstance(budget, dict) else None
        try:
            state = run_state(specs=specs.get(pk, []), steps=steps.get(pk, []),
                              tokens_counted=counted if isinstance(counted, list) else None,
                              gate_threshold=gate_threshold_of(start))
        except Exception as exc:  # one odd run must not stop the others being indexed
            log.warning("lab state of run %s failed", pk, exc_info=True)
            state = RunState(first_step=None, step_count=len(steps.get(pk, [])), series={}, signatures=[],
                             source="none", error=f"{type(exc).__name__}: {exc}")
        out.append((pk, updated_at, state))
    return out


def store(conn: Connection, computed: list[tuple[int, Any, RunState]]) -> int:
    """Replace the lab rows of the computed runs that still exist; returns how many."""
    if not computed:
        return 0
    pks = [pk for pk, _u, _s in computed]
    alive = {pk for (pk,) in conn.execute(select(RUNS.c.id).where(RUNS.c.id.in_(pks)))}
    conn.execute(delete(LAB_DECISIONS).where(LAB_DECISIONS.c.run_pk.in_(pks)))
    conn.execute(delete(LAB_RUNS).where(LAB_RUNS.c.run_pk.in_(pks)))
    now = datetime.now(timezone.utc)
    runs, decisions = [], []
    for pk, updated_at, state in computed:
        if pk not in alive:
            continue  # deleted since it was read
        runs.append({"run_pk": pk, "run_updated_at": updated_at, "indexed_at": now, "first_step": state.first_step,
                     "step_count": state.step_count, "series": pack_series(state.series, state.step_count),
                     "signatures": state.signatures,
                     "source": state.source, "error": state.error, "gate_threshold": state.gate_threshold})
        for c in state.criteria:
            decisions.append({"run_pk": pk, "criterion_id": c.id[:400], "type": (c.type or None) and c.type[:200],
                              "polarities": ",".join(c.polarities), "reason": c.reason, "verdict": c.verdict,
                              "step": c.step, "tool_call_index": c.tool_call_index,
                              "pass_from_step": c.pass_from_step, "declared": c.declared,
                              "decide_within": c.decide_within, "gating": c.gating, "weight": c.weight,
                              "source": c.source})
    if runs:
        conn.execute(LAB_RUNS.insert(), runs)
    if decisions:
        conn.execute(LAB_DECISIONS.insert(), decisions)
    return len(runs)


Submit = Callable[[Callable[[Connection], int]], int]


def direct(engine: Engine) -> Submit:
    """Write in a transaction of our own (the command line: no other writer)."""
    def run(fn: Callable[[Connection], int]) -> int:
        with engine.begin() as conn:
            return fn(conn)
    return run


def through_writer(writer: Any) -> Submit:
    """Write through the board's single writer and wait for it."""
    def run(fn: Callable[[Connection], int]) -> int:
        def job(_job: Any, _ingestor: Any) -> int:
            with writer.engine.begin() as conn:
                return fn(conn)
        done = writer.run("lab index", job, timeout=WRITE_TIMEOUT_S)
        if done.state != "done":
            raise RuntimeError(done.error or "lab index write failed")
        return int(done.result or 0)
    return run


def index_pending(engine: Engine, submit: Optional[Submit] = None, *, where: Optional[list[Any]] = None,
                  batch: int = BATCH_RUNS, should_stop: Callable[[], bool] = lambda: False,
                  rest: Callable[[float], None] = lambda _s: None) -> int:
    """Index every pending run (of the set `where`, else of the store); returns how many.
    After each batch `rest(seconds the batch took)` is called (the board's thread sleeps)."""
    submit = submit or direct(engine)
    done = after = 0
    while not should_stop():
        started = time.monotonic()
        with Session(engine) as session:
            pks = pending_pks(session, limit=batch, where=where, after=after)
            if not pks:
                break
            computed = compute(session, pks)
        # One pass in store order: a run that changed behind the cursor waits for the next pass.
        after = pks[-1]
        done += submit(lambda conn: store(conn, computed))
        rest(time.monotonic() - started)
    return done


class LabIndexer:
    """The board's background indexer (see the module docstring)."""

    def __init__(self, engine: Engine, writer: Any, *, background: bool = True, interval: float = 1.0,
                 quiet: int = 3):
        self.engine = engine
        self.writer = writer
        self.background = background
        self.interval = interval
        #: intervals the data version must stay put before a background pass (asked sets do not wait)
        self.quiet = quiet
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._asked: "OrderedDict[Any, list[Any]]" = OrderedDict()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="qita-lab-index", daemon=True)
        self.indexed = 0  # runs indexed since the start (tests and the health of the page)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def ask(self, key: Any, where: list[Any]) -> None:
        """A lab visitor is waiting for this set: index it next."""
        with self._lock:
            self._asked[key] = where
            while len(self._asked) > 20:
                self._asked.popitem(last=False)
        self._wake.set()

    def _rest(self, seconds: float) -> None:
        # Rest as long as the batch took: at most half of one core, and the writer free in between.
        self._stop.wait(min(seconds, 5.0))

    def _loop(self) -> None:
        from ..queries.cache import data_version

        seen = done = None
        still = 0
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                with self._lock:
                    asked = list(self._asked.items())
                    self._asked.clear()
                for _key, where in asked:
                    self.indexed += index_pending(self.engine, through_writer(self.writer), where=where,
                                                  should_stop=self._stop.is_set, rest=self._rest)
                if not self.background:
                    continue
                with Session(self.engine) as session:
                    version = data_version(session)
                still = still + 1 if version == seen else 0
                seen = version
                if still >= self.quiet and version != done:
                    self.indexed += index_pending(self.engine, through_writer(self.writer),
                                                  should_stop=self._stop.is_set, rest=self._rest)
                    done = version
            except Exception:  # indexing is background work: never let it fail loudly
                log.debug("lab indexing failed", exc_info=True)


def lab_version(session: Session) -> tuple:
    """What moves whenever the lab's state changes (rows indexed or replaced).

    Read once per session (one request), before the data it keys: the indexer commits
    between a request's queries, so a key read later than the data could file older
    figures under a newer version, and serve them once that version is current."""
    version = session.info.get("qita_lab_version")
    if version is None:
        version = session.info["qita_lab_version"] = tuple(session.execute(
            select(func.count(), func.max(LAB_RUNS.c.indexed_at)).select_from(LAB_RUNS)).one())
    return version

