"""search index without positions: `run_search_fts` again with FTS5's `detail=none`. The
trigram index kept every trigram's positions (3.7 MB for 2.3 MB of text) for phrase
queries; search now asks for the query's trigrams one by one (app.search.condition) and
re-checks every candidate with LIKE as before, so positions bought nothing but ingest time:
without them the index is ~50 times smaller and a batch's texts are indexed in half the
time. SQLite with FTS5's trigram tokenizer only; elsewhere nothing changes.

Revision ID: 0014
Revises: 0013
"""
from typing import Sequence, Union

from alembic import op

revision: str = '0014'
down_revision: Union[str, None] = '0013'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _has_index(bind) -> bool:
    return bind.exec_driver_sql("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'run_search_fts'"
                                ).scalar() > 0


def _create(detail: str) -> None:
    for trigger in ("run_search_fts_ad", "run_search_fts_ai"):
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    op.execute("DROP TABLE IF EXISTS run_search_fts")
    op.execute("CREATE VIRTUAL TABLE run_search_fts USING fts5(text, content='run_search', content_rowid='id', "
               f"tokenize='trigram', detail={detail})")
    # External content: the index is told the old text to remove. Texts are never updated
    # (a changed text is a new row), so inserts and deletes are all it needs.
    op.execute("CREATE TRIGGER run_search_fts_ai AFTER INSERT ON run_search BEGIN "
               "INSERT INTO run_search_fts(rowid, text) VALUES (new.id, new.text); END")
    op.execute("CREATE TRIGGER run_search_fts_ad AFTER DELETE ON run_search BEGIN "
               "INSERT INTO run_search_fts(run_search_fts, rowid, text) VALUES ('delete', old.id, old.text); END")
    op.execute("INSERT INTO run_search_fts(run_search_fts) VALUES ('rebuild')")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite" and _has_index(bind):
        _create("none")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite" and _has_index(bind):
        _create("full")
