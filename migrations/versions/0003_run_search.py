"""run search: an SQLite FTS5 trigram index over the runs' searchable text, kept in sync by
triggers (PostgreSQL keeps its plain ILIKE search and gets nothing here)

The index holds run_id, task_id, objective, final_result and stop_detail of each run
(external content: the text stays in `runs`, only the trigrams are stored). The list's
`q=` of three or more characters reads candidate runs from it and re-checks them with the
same ILIKE as before, so results are unchanged. Alembic's autogenerate cannot see virtual
tables or triggers: `app.models.include_name` keeps the comparison to real tables.

Revision ID: 0003
Revises: 0002
"""
from typing import Sequence, Union

from alembic import op

revision: str = '0003'
down_revision: Union[str, None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

COLUMNS = ("run_id", "task_id", "objective", "final_result", "stop_detail")


def _values(prefix: str) -> str:
    return ", ".join(f"{prefix}.{c}" for c in COLUMNS)


def _fts5_trigram(bind) -> bool:
    """Whether this SQLite has FTS5 with the trigram tokenizer (3.34+); without it search stays ILIKE."""
    version = tuple(int(p) for p in bind.exec_driver_sql("SELECT sqlite_version()").scalar().split(".")[:3])
    options = {r[0] for r in bind.exec_driver_sql("PRAGMA compile_options")}
    return version >= (3, 34, 0) and "ENABLE_FTS5" in options


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite" or not _fts5_trigram(bind):
        return
    cols = ", ".join(COLUMNS)
    op.execute(f"CREATE VIRTUAL TABLE runs_fts USING fts5({cols}, content='runs', content_rowid='id', "
               "tokenize='trigram')")
    # External content: the index is told the old values to remove and the new ones to add.
    op.execute(f"CREATE TRIGGER runs_fts_ai AFTER INSERT ON runs BEGIN "
               f"INSERT INTO runs_fts(rowid, {cols}) VALUES (new.id, {_values('new')}); END")
    op.execute(f"CREATE TRIGGER runs_fts_ad AFTER DELETE ON runs BEGIN "
               f"INSERT INTO runs_fts(runs_fts, rowid, {cols}) VALUES ('delete', old.id, {_values('old')}); END")
    # The ingest rewrites a run's derived columns every batch: only a change to the text reindexes.
    changed = " OR ".join(f"old.{c} IS NOT new.{c}" for c in COLUMNS)
    op.execute(f"CREATE TRIGGER runs_fts_au AFTER UPDATE OF {cols} ON runs WHEN {changed} BEGIN "
               f"INSERT INTO runs_fts(runs_fts, rowid, {cols}) VALUES ('delete', old.id, {_values('old')}); "
               f"INSERT INTO runs_fts(rowid, {cols}) VALUES (new.id, {_values('new')}); END")
    op.execute("INSERT INTO runs_fts(runs_fts) VALUES ('rebuild')")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for trigger in ("runs_fts_au", "runs_fts_ad", "runs_fts_ai"):
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    op.execute("DROP TABLE IF EXISTS runs_fts")
