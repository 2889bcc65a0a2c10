"""SQLModel tables of the store, and the public shapes the API returns.

One row per run, step, critic output, event, criterion and early-stop record, plus one
row per ingested source file (for idempotent, incremental ingest). Raw records are
kept as JSON so nothing a trace wrote is lost; the columns beside them are what the
list filters, sorts and aggregates need.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Optional

from sqlalchemy import JSON, BigInteger, Column, Index, LargeBinary, Table, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


def _json(nullable: bool = True) -> Any:
    return Field(default=None, sa_column=Column(JSON, nullable=nullable))


def _text() -> Any:
    return Field(default=None, sa_column=Column(Text, nullable=True))


class RunBase(SQLModel):
    """Fields of a run that the API shows as they are stored."""

    run_id: str = Field(max_length=200, unique=True, index=True)
    task_id: Optional[str] = Field(default=None, max_length=400, index=True)
    experiment: Optional[str] = Field(default=None, max_length=400, index=True)
    variant: Optional[str] = Field(default=None, max_length=400, index=True)
    replicate: int = 0
    objective: Optional[str] = _text()
    agent: Optional[str] = Field(default=None, max_length=400)
    model: Optional[str] = Field(default=None, max_length=400, index=True)
    schema_version: Optional[str] = Field(default=None, max_length=100)
    source_format: str = Field(default="qita", max_length=20)
    started_at: Optional[datetime] = Field(default=None, index=True)
    ended_at: Optional[datetime] = None
    started_ts: Optional[str] = Field(default=None, max_length=100)
    ended_ts: Optional[str] = Field(default=None, max_length=100)
    last_seen_at: Optional[datetime] = None
    budget_max_steps: Optional[int] = None
    budget_max_runtime_s: Optional[float] = None
    budget_max_tokens: Optional[int] = Field(default=None, sa_type=BigInteger)
    budget_max_cost_usd: Optional[float] = None
    early_stop_enabled: bool = False
    has_start: bool = False
    has_end: bool = False
    closed: bool = False
    status: Optional[str] = Field(default=None, max_length=40)
    stop_reason: Optional[str] = Field(default=None, max_length=200, index=True)
    stop_reason_raw: Optional[str] = Field(default=None, max_length=200)
    stop_detail: Optional[str] = _text()
    final_result: Optional[str] = _text()
    verdict: Optional[str] = Field(default=None, max_length=20, index=True)
    verdict_recorded: Optional[str] = Field(default=None, max_length=20)
    #: what the criteria alone say (app.derive), beside a verdict the run recorded
    criteria_verdict: Optional[str] = Field(default=None, max_length=20)
    verdict_reason: Optional[str] = _text()
    #: the producer's own terminal status as written (coder_eval's final_status)
    source_status: Optional[str] = Field(default=None, max_length=100, index=True)
    score: Optional[float] = None
    gated_on: Optional[str] = Field(default=None, max_length=20)
    state: str = Field(default="running", max_length=20, index=True)
    early_stopped: bool = Field(default=False, index=True)
    steps: int = 0
    retries: int = 0
    tokens_input: Optional[int] = Field(default=None, sa_type=BigInteger)
    tokens_output: Optional[int] = Field(default=None, sa_type=BigInteger)
    tokens_total: Optional[int] = Field(default=None, sa_type=BigInteger, index=True)
    #: parts of tokens_input: input read from / written to a prompt cache
    tokens_cache_read: Optional[int] = Field(default=None, sa_type=BigInteger)
    tokens_cache_write: Optional[int] = Field(default=None, sa_type=BigInteger)
    tool_calls: Optional[int] = None
    #: the whole bill, and the agent's slice of it
    cost_usd: Optional[float] = None
    agent_cost_usd: Optional[float] = None
    #: end to end, and the agent's own time (without setup and grading)
    elapsed_s: Optional[float] = Field(default=None, index=True)
    agent_elapsed_s: Optional[float] = None


class Run(RunBase, table=True):
    """A run: its `run_start`, its `run_end`, and the fields derived from all its records."""

    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_experiment_variant", "experiment", "variant"),
        Index("ix_runs_steps", "steps"),
        # the list filtered by experiment, newest first, walks this index in order
        Index("ix_runs_experiment_started", "experiment", "started_at"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    critics: Optional[Any] = _json()
    stop_criteria: Optional[Any] = _json()
    tags: Optional[Any] = _json()
    meta: Optional[Any] = _json()
    start_record: Optional[Any] = _json()
    end_record: Optional[Any] = _json()
    failure_report: Optional[Any] = _json()
    warnings: Optional[Any] = _json()
    updated_at: Optional[datetime] = Field(default=None, index=True)
    #: the source that began the run (ingest_sources.path) and how to name it; records from
    #: other sources may add to the run but not change it (app.ingest.overwrite)
    origin: Optional[str] = _text()
    origin_label: Optional[str] = _text()


class RunPublic(RunBase):
    """A run as the API returns it."""

    critics: Optional[Any] = None
    stop_criteria: Optional[Any] = None
    tags: Optional[Any] = None
    meta: Optional[Any] = None
    failure_report: Optional[Any] = None
    warnings: Optional[Any] = None


class RunTag(SQLModel, table=True):
    """One tag of one run, so the tag filter uses an index."""

    __tablename__ = "run_tags"

    run_pk: int = Field(foreign_key="runs.id", primary_key=True, ondelete="CASCADE")
    tag: str = Field(max_length=400, primary_key=True, index=True)


class Step(SQLModel, table=True):
    """One executed step; `record` is the step line as written (the raw-JSON view)."""

    __tablename__ = "steps"
    __table_args__ = (
        UniqueConstraint("run_pk", "step", name="uq_steps_run_step"),
        # covers the verdict lane's query, so a 10,000-step run never reads its step records
        Index("ix_steps_lane", "run_pk", "step", "critic_action", "critic_score", "retry"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="runs.id", ondelete="CASCADE")
    step: int
    ts: Optional[str] = Field(default=None, max_length=100)
    duration_s: Optional[float] = None
    tokens_input: Optional[int] = Field(default=None, sa_type=BigInteger)
    tokens_output: Optional[int] = Field(default=None, sa_type=BigInteger)
    tokens_total: Optional[int] = Field(default=None, sa_type=BigInteger)
    cost_usd: Optional[float] = None
    retry: bool = False
    critic_action: Optional[str] = Field(default=None, max_length=20)
    critic_score: Optional[float] = None
    record: Optional[str] = _text()
    #: for a large record: a copy with long values cut (app.previews), what pages read
    preview: Optional[str] = _text()
    #: the tool calls the step made (app.ingest.rows.step_tool_calls; None: it lists none)
    tool_calls: Optional[int] = None


class CriticOutputRow(SQLModel, table=True):
    """One critic's output on one step, in the order the critics ran."""

    __tablename__ = "critic_outputs"
    __table_args__ = (UniqueConstraint("run_pk", "step", "idx", name="uq_critic_outputs_run_step_idx"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="runs.id", ondelete="CASCADE")
    step: int
    idx: int
    critic: Optional[str] = _text()
    action: Optional[str] = _text()
    effective_action: str = Field(default="continue", max_length=20)
    reason: Optional[str] = _text()
    score: Optional[float] = None
    details: Optional[Any] = _json()


class EventRow(SQLModel, table=True):
    """One phase event; `digest` identifies its line so re-ingest adds nothing."""

    __tablename__ = "events"
    __table_args__ = (
        UniqueConstraint("run_pk", "digest", name="uq_events_run_digest"),
        Index("ix_events_run_step", "run_pk", "step"),
    )

    id: Optional[int] = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="runs.id", ondelete="CASCADE")
    step: Optional[int] = None
    phase: Optional[str] = _text()
    ok: Optional[bool] = None
    ts: Optional[str] = Field(default=None, max_length=100)
    digest: str = Field(max_length=64)
    record: Optional[str] = _text()
    #: for a large record: a copy with long values cut (app.previews), what pages read
    preview: Optional[str] = _text()


class CriterionRow(SQLModel, table=True):
    """A success criterion: its spec from `run_start` and its graded result."""

    __tablename__ = "criteria"
    __table_args__ = (UniqueConstraint("run_pk", "criterion_id", name="uq_criteria_run_criterion"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="runs.id", ondelete="CASCADE")
    criterion_id: str = Field(max_length=400)
    position: int = 0
    type: Optional[str] = _text()
    description: Optional[str] = _text()
    stop_when: Optional[str] = Field(default=None, max_length=20)
    gating: bool = True
    pass_threshold: float = 0.9
    has_spec: bool = False
    has_result: bool = False
    score: Optional[float] = None
    passed: Optional[bool] = None
    live_verdict: Optional[str] = Field(default=None, max_length=20)
    decided_at_step: Optional[int] = None
    details: Optional[Any] = _json()
    spec: Optional[Any] = _json()
    result: Optional[Any] = _json()


class EarlyStopRow(SQLModel, table=True):
    """The early-stop record of a run (at most one)."""

    __tablename__ = "early_stops"

    id: Optional[int] = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="runs.id", unique=True, ondelete="CASCADE")
    reason: Optional[str] = _text()
    deciding_criterion: Optional[str] = _text()
    armed_criteria: Optional[Any] = _json()
    step: Optional[int] = None
    tool_call_index: Optional[int] = None
    elapsed_s: Optional[float] = None
    turns_remaining: Optional[int] = None
    record: Optional[Any] = _json()


class IngestSource(SQLModel, table=True):
    """A file the board has read, and how far: the basis of idempotent, incremental ingest."""

    __tablename__ = "ingest_sources"

    id: Optional[int] = Field(default=None, primary_key=True)
    path: str = Field(sa_column=Column(Text, nullable=False, unique=True))
    kind: str = Field(default="jsonl", max_length=40)
    size: int = Field(default=0, sa_type=BigInteger)
    mtime: Optional[float] = None
    content_hash: Optional[str] = Field(default=None, max_length=64)
    offset: int = Field(default=0, sa_type=BigInteger)
    lines: int = Field(default=0, sa_type=BigInteger)
    updated_at: Optional[datetime] = None


class Upload(SQLModel, table=True):
    """One upload through the board (page or API): its files and the sources they were read as.

    Kept so that everything an upload added can be removed again (app.removal).
    """

    __tablename__ = "uploads"

    id: Optional[int] = Field(default=None, primary_key=True)
    created_at: Optional[datetime] = None
    files: Optional[Any] = _json()  # [{"name", "bytes"}], as the upload result lists them
    source_keys: Optional[Any] = _json()  # the ingest_sources keys ("upload:NAME") its files were read as
    records: int = Field(default=0, sa_type=BigInteger)
    #: {"errors": [{file, line, message}], "warnings": [...], "more_errors", "more_warnings"}:
    #: what the upload result listed, kept for its page once the job is forgotten
    report: Optional[Any] = _json()


class UploadRun(SQLModel, table=True):
    """A run an upload created (`created`) or added records to."""

    __tablename__ = "upload_runs"

    upload_id: int = Field(foreign_key="uploads.id", primary_key=True, ondelete="CASCADE")
    run_pk: int = Field(foreign_key="runs.id", primary_key=True, ondelete="CASCADE", index=True)
    created: bool = False


class LabRun(SQLModel, table=True):
    """The policy lab's state of one finished run (app.lab.index): computed once from its
    steps, kept until the run changes (`run_updated_at` is the `runs.updated_at` it saw)."""

    __tablename__ = "lab_runs"

    run_pk: int = Field(foreign_key="runs.id", primary_key=True, ondelete="CASCADE")
    run_updated_at: Optional[datetime] = None
    indexed_at: Optional[datetime] = Field(default=None, index=True)
    #: the first step's index and how many step records the run has (steps are contiguous)
    first_step: Optional[int] = None
    step_count: int = 0
    #: cumulative tokens, counted tokens, seconds, cost and tool calls after each step (app.lab.state.pack_series)
    series: Optional[bytes] = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    #: a short digest of each step's tool calls, to find where two runs' actions part
    signatures: Optional[Any] = _json()
    #: where the live verdicts came from: recorded, replayed, mixed or none
    source: Optional[str] = Field(default=None, max_length=20)
    error: Optional[str] = _text()
    #: the weighted share of its armed criteria an early-stopped run needs to pass (null: 1, all)
    gate_threshold: Optional[float] = None


class LabDecision(SQLModel, table=True):
    """One criterion of one run as the lab sees it: the verdicts it can decide live (or why
    it cannot be evaluated live), and its first live decision (verdicts latch)."""

    __tablename__ = "lab_decisions"

    run_pk: int = Field(foreign_key="runs.id", primary_key=True, ondelete="CASCADE")
    criterion_id: str = Field(max_length=400, primary_key=True)
    type: Optional[str] = Field(default=None, max_length=200)
    #: "pass", "fail", "fail,pass", or "" when it cannot be evaluated live
    polarities: str = Field(default="", max_length=20)
    reason: Optional[str] = _text()
    verdict: Optional[str] = Field(default=None, max_length=20)
    step: Optional[int] = None
    tool_call_index: Optional[int] = None
    #: still undecided at a stop at step s, its check on the cut run passes when s >= this
    #: (a must-not-run check: from the first step); null: it fails
    pass_from_step: Optional[int] = None
    #: the arming the run's own spec declares (stop_when, or coder_eval's armable_as) and decision budget
    declared: Optional[str] = Field(default=None, max_length=20)
    decide_within: Optional[int] = None
    gating: bool = True
    #: its weight in a weighted armed gate (null: 1)
    weight: Optional[float] = None
    source: Optional[str] = Field(default=None, max_length=20)


class RunSearchText(SQLModel, table=True):
    """One distinct searchable text of a run, masked as pages show it (app.search)."""

    __tablename__ = "run_search"
    __table_args__ = (UniqueConstraint("run_pk", "digest", name="uq_run_search_run_digest"),)

    id: Optional[int] = Field(default=None, primary_key=True)
    run_pk: int = Field(foreign_key="runs.id", ondelete="CASCADE")
    #: a short digest of `text`, so the same text is held once per run
    digest: str = Field(max_length=16)
    text: str = Field(sa_column=Column(Text, nullable=False))


#: SQLite only (migrations 0010, 0014, 0018): the FTS5 trigram index over `run_search.text`
#: behind the runs list's search. A virtual table (filled by app.search.insert_rows, emptied
#: by a delete trigger), so not part of the metadata above.
RUN_SEARCH_TABLE = "run_search_fts"


#: Tables an ingest writes row by row that keep no foreign key to `runs` on PostgreSQL
#: (migration 0016: the per-row check was a third of the server's ingest time); the runs
#: they name are held by the writer instead (app.ingest.store, app.removal).
UNCHECKED_ON_POSTGRES = ("steps", "critic_outputs", "events")


def include_object(dialect: str) -> Callable[..., bool]:
    """Alembic's comparison filter for objects, for `dialect`: on PostgreSQL the foreign
    keys of UNCHECKED_ON_POSTGRES, which the models declare for SQLite, are not expected."""
    def include(obj: Any, name: Optional[str], type_: str, reflected: bool, compare_to: Any) -> bool:
        if dialect == "postgresql" and type_ == "foreign_key_constraint":
            table = getattr(getattr(obj, "parent", None), "name", None) or getattr(getattr(obj, "table", None), "name", None)
            return table not in UNCHECKED_ON_POSTGRES
        return True

    return include


def include_name(name: Optional[str], type_: str, parent_names: dict[str, Any]) -> bool:
    """Alembic's comparison filter: skip the search index's virtual table and its shadow tables.

    Autogenerate cannot express an FTS5 table, so without this every comparison would
    ask to drop it. Only those exact names are skipped; every other table is compared.
    """
    if type_ == "table" and name is not None:
        return not (name == RUN_SEARCH_TABLE or name.startswith(RUN_SEARCH_TABLE + "_"))
    return True


# The tables as SQLAlchemy Core objects, for the queries and the ingest writer, which work
# on rows rather than model instances (one place to name them).
def _table(model: type[SQLModel]) -> Table:
    """A table model's Core table (SQLModel sets `__table__` at class creation, which type
    checkers do not see)."""
    return model.__table__  # type: ignore[attr-defined]


RUNS = _table(Run)
RUN_TAGS = _table(RunTag)
STEPS = _table(Step)
CRITICS = _table(CriticOutputRow)
EVENTS = _table(EventRow)
CRITERIA = _table(CriterionRow)
EARLY = _table(EarlyStopRow)
SOURCES = _table(IngestSource)
UPLOADS = _table(Upload)
UPLOAD_RUNS = _table(UploadRun)
LAB_RUNS = _table(LabRun)
LAB_DECISIONS = _table(LabDecision)
RUN_SEARCH = _table(RunSearchText)
