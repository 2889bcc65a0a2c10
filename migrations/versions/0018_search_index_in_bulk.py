"""search index in bulk: `run_search_fts` without its insert trigger. The ingest adds a
batch's search rows in one statement and then their texts to the trigram index in one
`INSERT ... SELECT` (app.search.insert_rows). Through the trigger FTS5 indexed row by row
inside a trigger program, which cost it 2.4 times as much: the search rows of 1,730
five-step runs, 43 transactions, took 0.84 s with the trigger and 0.36 s in bulk
(docs/performance.md). The delete trigger stays (deletes are rare: removal, a rewritten
source). SQLite with FTS5's trigram tokenizer only; elsewhere nothing changes.

Revision ID: 0018
Revises: 0017
"""
from typing import Sequence, Union

from alembic import op

revision: str = '0018'
down_revision: Union[str, None] = '0017'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _has_index(bind) -> bool:
    return bind.exec_driver_sql("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'run_search_fts'"
                                ).scalar() > 0


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite" and _has_index(bind):
        op.execute("DROP TRIGGER IF EXISTS run_search_fts_ai")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite" and _has_index(bind):
        op.execute("CREATE TRIGGER IF NOT EXISTS run_search_fts_ai AFTER INSERT ON run_search BEGIN "
                   "INSERT INTO run_search_fts(rowid, text) VALUES (new.id, new.text); END")
