"""PostgreSQL fast path for the ingest's bulk rows: COPY into staging, one upsert per table.

The portable path (SQLAlchemy Core `insert ... on_conflict` executemany) spent most of
a PostgreSQL ingest in per-row parameter processing on our side and per-row statement
execution on the server: the same 40 MB trace took 2.4x as long as on SQLite
(docs/performance.md). Here the rows the applier built for SQLite (positional tuples,
JSON already encoded as text) go through psycopg 3's `COPY ... FROM STDIN`:

* rows that may already exist (steps: replaced; events: kept once by digest) are copied
  into a temporary staging table, then moved with one `INSERT ... SELECT ... ON CONFLICT`
  per table per batch, so re-ingesting a file changes nothing and a re-read step
  replaces the stored one, exactly as the portable statements do;
* rows that cannot conflict (critic outputs, inserted after their step's old outputs
  were deleted) are copied straight into their table.

Everything runs on the SQLAlchemy connection's own psycopg connection, inside the
batch's transaction, so the source offset saved in the same transaction still commits
or rolls back with its rows.
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional, Sequence

from sqlalchemy.engine import Connection, Engine


def usable(engine: Engine) -> bool:
    """True when `engine` talks to PostgreSQL through psycopg 3 (the only driver with this COPY API)."""
    return engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg"


def _stage_name(table: str, cols: Sequence[str]) -> str:
    # The column list is part of the name: a staging table made for one column set is never
    # reused for another (temporary tables live as long as the pooled connection).
    digest = hashlib.sha1(",".join(cols).encode()).hexdigest()[:8]
    return f"qita_stage_{table}_{digest}"


def write(conn: Connection, table: str, cols: Sequence[str], rows: list[tuple], *, keys: Optional[Sequence[str]] = None,
          on_conflict: Optional[str] = None) -> None:
    """Write positional `rows` of `cols` into `table` in `conn`'s transaction.

    `on_conflict` is None (plain insert: a duplicate key fails, as the portable insert
    does), "nothing" or "update" (on `keys`: the new values replace the stored ones).
    JSON columns take their values as JSON text.
    """
    if not rows:
        return
    import psycopg  # only here: psycopg is the optional `postgres` extra

    raw = conn.connection.driver_connection
    col_list = ", ".join(cols)
    with raw.cursor() as cur:
        if on_conflict is None:
            _copy(cur, table, col_list, rows)
            return
        # Most batches are new rows: COPY them straight into the table under a savepoint.
        # Only when a key is already there (a re-read step, an event seen before, one
        # event twice in the batch) does the COPY fail; the savepoint undoes it and the
        # rows take the staging detour with the upsert the portable path would run.
        cur.execute("SAVEPOINT qita_copy")
        try:
            _copy(cur, table, col_list, rows)
        except psycopg.errors.UniqueViolation:
            cur.execute("ROLLBACK TO SAVEPOINT qita_copy; RELEASE SAVEPOINT qita_copy")
        else:
            cur.execute("RELEASE SAVEPOINT qita_copy")
            return
        stage = _stage_name(table, cols)
        # Created once per server session; ON COMMIT DELETE ROWS empties it at every commit
        # and the DELETE ... RETURNING below empties it at once, so a second write in the
        # same transaction starts from an empty stage. IF NOT EXISTS (not a cache on our
        # side) keeps this right after a rollback that dropped a table created in it.
        cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS AS "
                    f"SELECT {col_list} FROM {table} WITH NO DATA")
        _copy(cur, stage, col_list, rows)
        if on_conflict == "nothing":
            action = "DO NOTHING"
        else:
            sets = ", ".join(f"{c} = excluded.{c}" for c in cols if c not in keys)
            action = f"DO UPDATE SET {sets}"
        cur.execute(f"WITH moved AS (DELETE FROM {stage} RETURNING {col_list}) "
                    f"INSERT INTO {table} ({col_list}) SELECT {col_list} FROM moved "
                    f"ON CONFLICT ({', '.join(keys)}) {action}")


def _copy(cur: Any, table: str, col_list: str, rows: list[tuple]) -> None:
    # Text COPY: psycopg formats each row in C and the server parses it by column type,
    # which also turns the JSON text of json columns into json values.
    with cur.copy(f"COPY {table} ({col_list}) FROM STDIN") as copy:
        write_row = copy.write_row
        for row in rows:
            write_row(row)
