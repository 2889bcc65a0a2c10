"""PostgreSQL fast path for the ingest's bulk rows: COPY, and an upsert only where keys exist.

The portable path (SQLAlchemy Core `insert ... on_conflict` executemany) spent most of
a PostgreSQL ingest in per-row parameter processing on our side and per-row statement
execution on the server: the same 40 MB trace took 2.1x to 2.5x as long as on SQLite
(docs/performance.md). Here the rows the applier built for SQLite (positional tuples,
JSON already encoded as text) go through psycopg 3's `COPY ... FROM STDIN`:

* every table's rows are first copied straight into the table under a savepoint: most
  batches hold only new keys (a new file, a growing file read from its offset);
* when a key is already stored (a step written again, an event seen before, one event
  twice in a batch) the COPY fails on the unique key, the savepoint undoes it, and the
  rows go through a temporary staging table and one `INSERT ... SELECT ... ON CONFLICT`
  per table, which does what the portable statements do: re-ingesting a file changes
  nothing and a re-written step replaces the stored one, its critic outputs with it.

Everything runs on the SQLAlchemy connection's own psycopg connection, inside the
batch's transaction, so the source offset saved in the same transaction still commits
or rolls back with its rows.
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional, Sequence

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

#: A re-written row of the key table replaces these rows of the other table, matched on
#: these columns (a step's critic outputs go with it; on SQLite store.py deletes them).
REPLACES = {"steps": ("critic_outputs", ("run_pk", "step"))}
#: The same, seen from the dependent table: a plain COPY that meets stored rows for these
#: keys deletes them first (only possible if a step row went missing under its outputs).
REPLACED_BY = {dep: cols for _key_table, (dep, cols) in REPLACES.items()}


def usable(engine: Engine) -> bool:
    """True when `engine` talks to PostgreSQL through psycopg 3 (the only driver with this COPY API)."""
    return engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg"


def _stage_name(table: str, cols: Sequence[str]) -> str:
    # The column list is part of the name: a staging table made for one column set is never
    # reused for another (temporary tables live as long as the pooled connection).
    digest = hashlib.sha1(",".join(cols).encode()).hexdigest()[:8]
    return f"qita_stage_{table}_{digest}"


def _begin(conn: Connection, cur: Any) -> None:
    """The savepoint of one write, and lz4 for the values PostgreSQL compresses in this transaction.

    Step records are a few KB, above PostgreSQL's 2 KB TOAST threshold, so each is
    compressed as it is stored; with the default pglz that compression was a third of
    the server's ingest time, lz4 needs about a third of it (docs/performance.md). SET
    LOCAL ends with the transaction; servers built without lz4 keep their default.
    """
    info = conn.connection.info
    lz4 = info.get("qita_lz4")
    if lz4 is None:
        cur.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
        row = cur.fetchone()
        lz4 = info["qita_lz4"] = bool(row and row[0])
    cur.execute("SET LOCAL default_toast_compression = 'lz4'; SAVEPOINT qita_copy" if lz4 else "SAVEPOINT qita_copy")


def write(conn: Connection, table: str, cols: Sequence[str], rows: list[tuple], *, keys: Optional[Sequence[str]] = None,
          on_conflict: Optional[str] = None) -> None:
    """Write positional `rows` of `cols` into `table` in `conn`'s transaction.

    `on_conflict` is None (plain insert), "nothing" or "update" (on `keys`: the new
    values replace the stored ones). JSON columns take their values as JSON text.
    """
    if not rows:
        return
    import psycopg  # only here: psycopg is the optional `postgres` extra

    try:
        _write(conn, table, cols, rows, keys=keys, on_conflict=on_conflict)
    except psycopg.Error as exc:
        # Raised as SQLAlchemy raises driver errors, so the ingest treats a failed COPY like
        # any failed statement: the batch rolls back, cached run keys are dropped, and the
        # caller hears "cannot write to the database".
        raise DBAPIError.instance(f"COPY {table}", None, exc, psycopg.Error,
                                  connection_invalidated=conn.connection.driver_connection.closed) from exc


def _write(conn: Connection, table: str, cols: Sequence[str], rows: list[tuple], *, keys: Optional[Sequence[str]],
           on_conflict: Optional[str]) -> None:
    import psycopg

    col_list = ", ".join(cols)
    with conn.connection.driver_connection.cursor() as cur:
        _begin(conn, cur)
        try:
            _copy(cur, table, col_list, rows)
        except psycopg.errors.UniqueViolation:
            if on_conflict is None and table not in REPLACED_BY:
                raise  # a plain insert of a stored key fails, as the portable insert does
            cur.execute("ROLLBACK TO SAVEPOINT qita_copy; RELEASE SAVEPOINT qita_copy")
        else:
            cur.execute("RELEASE SAVEPOINT qita_copy")
            return
        if on_conflict is None:
            match = REPLACED_BY[table]
            stage = _stage(cur, table, match, [tuple(r[cols.index(c)] for c in match) for r in rows])
            _delete_matching(cur, table, match, stage)
            cur.execute(f"DELETE FROM {stage}")
            _copy(cur, table, col_list, rows)
            return
        stage = _stage(cur, table, cols, rows)
        if table in REPLACES:
            dep, match = REPLACES[table]
            _delete_matching(cur, dep, match, stage)
        if on_conflict == "nothing":
            action = "DO NOTHING"
        else:
            sets = ", ".join(f"{c} = excluded.{c}" for c in cols if c not in keys)
            action = f"DO UPDATE SET {sets}"
        # DELETE ... RETURNING empties the stage in the same statement, so a second write in
        # this transaction starts from an empty one (ON COMMIT DELETE ROWS covers the rest).
        cur.execute(f"WITH moved AS (DELETE FROM {stage} RETURNING {col_list}) "
                    f"INSERT INTO {table} ({col_list}) SELECT {col_list} FROM moved "
                    f"ON CONFLICT ({', '.join(keys)}) {action}")


def _stage(cur: Any, table: str, cols: Sequence[str], rows: list[tuple]) -> str:
    """Copy `rows` into the session's staging table for `table`'s `cols`; its name."""
    stage = _stage_name(table, cols)
    col_list = ", ".join(cols)
    # Created once per server session, emptied at every commit. IF NOT EXISTS (not a cache
    # on our side) keeps this right after a rollback that dropped a table created in it.
    cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS AS "
                f"SELECT {col_list} FROM {table} WITH NO DATA")
    _copy(cur, stage, col_list, rows)
    return stage


def _delete_matching(cur: Any, table: str, match: Sequence[str], stage: str) -> None:
    on = " AND ".join(f"t.{c} = s.{c}" for c in match)
    cur.execute(f"DELETE FROM {table} t USING (SELECT DISTINCT {', '.join(match)} FROM {stage}) s WHERE {on}")


def _copy(cur: Any, table: str, col_list: str, rows: list[tuple]) -> None:
    # Text COPY: psycopg formats each row in C and the server parses it by column type,
    # which also turns the JSON text of json columns into json values.
    with cur.copy(f"COPY {table} ({col_list}) FROM STDIN") as copy:
        write_row = copy.write_row
        for row in rows:
            write_row(row)
