"""The runs list's search: what it finds, and only as a page would show it.

Search runs over `run_search`: rows of a run's texts (its fields, a line each, and its critic
and step texts per batch), each **masked** the way
pages mask it (app.secrets) before it is stored: a query can then never match inside a
value that is shown masked, so search is no oracle for secrets (the raw columns, which
still hold them, are never searched). What a run is found by:

- its run id, task id, experiment, variant, model, objective, final result, stop detail
  and verdict reason, and the strings of its metadata and end record (an experiment's
  description, an error message), masked by key;
- every critic's reason and action (`q=returncode` finds the run whose critic said so);
- every step's tool names and error texts (`app.step_failures.step_errors`).

Each run field (app.search_texts) is cut to `TEXT_CHARS` where no secret is split, then masked; a batch's
critic and step texts go in as one masked document (`document`), built from the records
as the reader reads them (app.ingest.batch: in the reader's process when it has one),
never read back from the store. Rows are added inside each batch's transaction
(app.derive gives the rows of every run a batch touched, `rows_for`, and the writer adds them in
one statement, `insert_rows`). Duplicates are kept
out by a digest per run.

On SQLite with FTS5's trigram tokenizer, `run_search_fts` (migrations 0010, 0014 and 0018:
rows added by `insert_rows` in bulk, removed by a delete trigger) gives candidate rows for
a q of three characters or more; the same case-insensitive LIKE re-checks them, so
results are what the LIKE alone gives.
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional

import orjson
from sqlalchemy import and_, column, exists, false, func, literal_column, select, table
from sqlalchemy import text as sql_text
from sqlalchemy.engine import Connection

from .models import CRITICS, RUN_SEARCH, RUN_SEARCH_TABLE, RUNS, STEPS
from .search_texts import add_texts, document, run_texts, step_texts

#: Trigrams need three characters; a shorter q uses the LIKE alone.
MIN_INDEX_CHARS = 3

_FTS = table(RUN_SEARCH_TABLE, column("rowid"))
_SQLITE_MASTER = table("sqlite_master", column("type"), column("name"))
_HAS_INDEX: dict[tuple, bool] = {}
_INSERT_TRIGGER = "run_search_fts_ai"
_INDEX_OBJECTS = select(_SQLITE_MASTER.c.name).where(_SQLITE_MASTER.c.name.in_([RUN_SEARCH_TABLE, _INSERT_TRIGGER]))


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


_INSERTS: dict[str, Any] = {}


def insert_rows(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Add search rows (`rows_for`), one statement for all, those a run holds already left
    out; on SQLite, then their texts to the trigram index in one more (`_index_new`)."""
    if not rows:
        return
    dialect = conn.dialect.name
    stmt = _INSERTS.get(dialect)
    if stmt is None:
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        stmt = _INSERTS[dialect] = insert(RUN_SEARCH).on_conflict_do_nothing(index_elements=["run_pk", "digest"])
    last = _last_unindexed(conn) if dialect == "sqlite" else None
    conn.execute(stmt, rows)
    if last is not None:
        conn.execute(_INDEX_NEW, {"last": last})


#: The rows added after `last` (the largest id before them: a new row's id is larger than
#: any before it, and SQLite's one writer holds the file) put in the trigram index at once.
#: FTS5 indexing the same rows one by one through an insert trigger took 2.4 times as long
#: (migration 0018).
_INDEX_NEW = sql_text(f"INSERT INTO {RUN_SEARCH_TABLE} (rowid, text) "
                  f"SELECT id, text FROM {RUN_SEARCH.name} WHERE id > :last")
_LAST_ID = select(func.coalesce(func.max(RUN_SEARCH.c.id), 0))


def _last_unindexed(conn: Connection) -> Optional[int]:
    """The largest search row id now, when this database has the trigram index and adds to
    it in bulk; None without the index, or where the insert trigger still adds each row
    (a database between migrations 0010 and 0018: 0010 indexes the runs it finds through
    this module). Asked each time, not cached: migrations run in the board's own process."""
    names = {n for (n,) in conn.execute(_INDEX_OBJECTS)}
    if RUN_SEARCH_TABLE not in names or _INSERT_TRIGGER in names:
        return None
    return conn.execute(_LAST_ID).scalar_one()


def rows_for(pk: int, run: Any, doc: Optional[str], *, new: bool = False) -> list[dict[str, Any]]:
    """Run `pk`'s search rows after a batch: its fields (`run`: its row) as one text, a field
    per line, and `doc`, the batch's critic and step texts (`document`, built as the records
    were read). Keyed by a digest per run, so fields that did not change add nothing
    (`insert_rows`). One row for all the fields, not one each: FTS5 pays per row indexed,
    and 1,730 five-step runs took 0.77 s to index as 23,181 rows, 0.31 s as 1,730.

    `new`: a run created in this transaction, which holds no search row yet: its fields and
    document go in one row. The trigram index pays per distinct trigram of a row, and a
    short run's fields and critic texts share most of theirs: 1,730 five-step runs took
    0.52 s to index as two rows each, 0.39 s as one (docs/performance.md). A run read on
    in later batches gets its fields' own row then, kept once as before."""
    fields = "\n".join(dict.fromkeys(run_texts(run)))
    texts = [t for t in (fields, doc) if t]
    if new and len(texts) == 2:
        texts = ["\n".join(texts)]
    return list({(d := _digest(t)): {"run_pk": pk, "digest": d, "text": t} for t in texts}.values())


def index_batch(conn: Connection, pk: int, run: Any, doc: Optional[str]) -> None:
    """Add run `pk`'s searchable texts after a batch (`rows_for`, then `insert_rows`)."""
    insert_rows(conn, rows_for(pk, run, doc))


def index_run(conn: Connection, pk: int, run: Any) -> None:
    """Index what is stored of run `pk` (`run`: its row): its fields, and its critic and
    step texts read back from their rows. The ingest indexes batches as it reads them
    (`rows_for`); this is for runs stored before the search existed (migration 0010)."""
    lines: dict[str, None] = {}
    for action, reason in conn.execute(select(CRITICS.c.action, CRITICS.c.reason)
                                       .where(CRITICS.c.run_pk == pk).order_by(CRITICS.c.id)):
        add_texts(lines, (action, reason))
    for (record_text,) in conn.execute(select(func.coalesce(STEPS.c.preview, STEPS.c.record))
                                       .where(STEPS.c.run_pk == pk).order_by(STEPS.c.id)):
        if record_text:
            try:
                record = orjson.loads(record_text)
            except orjson.JSONDecodeError:
                continue
            add_texts(lines, step_texts(record))
    index_batch(conn, pk, run, document(lines))


def has_index(conn: Any) -> bool:
    """Whether this database has the trigram index (SQLite with FTS5's trigram tokenizer)."""
    bind = conn.get_bind() if hasattr(conn, "get_bind") else conn.engine
    if bind.dialect.name != "sqlite":
        return False
    key = (id(bind), str(bind.url))
    found = _HAS_INDEX.get(key)
    if found is None:
        found = _HAS_INDEX[key] = conn.execute(
            select(func.count()).select_from(_SQLITE_MASTER)
            .where(_SQLITE_MASTER.c.type == "table", _SQLITE_MASTER.c.name == RUN_SEARCH_TABLE)).scalar_one() > 0
    return found


#: Most trigrams of one q asked of the index: enough to make its candidates few; the LIKE
#: re-check makes the result exact whatever the index proposes.
MAX_QUERY_TRIGRAMS = 12


def trigram_query(q: str) -> str:
    """The FTS5 query for the texts holding trigrams of `q` that cover it (3 characters or more).

    The index keeps no positions (migration 0014: `detail=none`, which refuses phrase
    queries), so it is asked for trigrams on their own, ANDed: a superset of the texts
    holding `q`, which the LIKE re-check narrows to exactly those. The trigrams taken
    side by side (every third character, and the last three) cover q as well as all of
    them overlapping do, and each one asked costs a walk of its list: at 100,000 runs
    `q=task-00042` took 10 ms with its 8 trigrams and 2.5 ms with these 4, for 1,390
    candidates instead of 1,386. Each is one quoted FTS5 string: operators (AND, NEAR, *,
    parentheses) inside it are plain text. A long q asks for at most MAX_QUERY_TRIGRAMS,
    spread along it."""
    starts = list(range(0, len(q) - 2, 3))
    if starts and starts[-1] != len(q) - 3:
        starts.append(len(q) - 3)
    grams = list(dict.fromkeys(q[i:i + 3] for i in starts))
    if len(grams) > MAX_QUERY_TRIGRAMS:
        step = (len(grams) - 1) / (MAX_QUERY_TRIGRAMS - 1)
        grams = [grams[round(i * step)] for i in range(MAX_QUERY_TRIGRAMS)]
    return " AND ".join('"' + g.replace('"', '""') + '"' for g in grams)


def escape_like(q: str) -> str:
    """`q` matched literally by LIKE / ILIKE with `escape="\\"`."""
    return q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def condition(conn: Any, q: str, *, use_index: bool = True) -> Any:
    """A WHERE condition on `runs`: the runs one of whose searchable texts holds `q`
    (case-insensitive). `use_index=False` checks run by run (a short walk of a sort index
    that a common q fills a page within)."""
    if "\x00" in q:
        # No stored text holds NUL (index_run removes it), and SQLite's LIKE ends its
        # pattern at one: `%\x00` read as `%` and matched every run.
        return false()
    pattern = f"%{escape_like(q)}%"
    like = RUN_SEARCH.c.text.ilike(pattern, escape="\\")
    if not use_index or conn is None or len(q) < MIN_INDEX_CHARS or not has_index(conn):
        return exists().where(RUN_SEARCH.c.run_pk == RUNS.c.id, like)
    candidates = select(_FTS.c.rowid).where(literal_column(RUN_SEARCH_TABLE).op("MATCH")(trigram_query(q)))
    return RUNS.c.id.in_(select(RUN_SEARCH.c.run_pk).where(and_(RUN_SEARCH.c.id.in_(candidates), like)))
