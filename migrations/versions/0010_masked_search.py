"""masked search: the runs list searches `run_search`, one masked text per run field,
critic reason and action, tool name and error text (app.search), instead of the raw run
columns (which let a query find characters of a masked secret). On SQLite the trigram
index moves from `runs_fts` to `run_search_fts`. Existing runs are indexed here.

Revision ID: 0010
Revises: 0009
"""
from typing import Sequence, Union

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0010'
down_revision: Union[str, None] = '0009'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _fts5_trigram(bind) -> bool:
    """Whether this SQLite has FTS5 with the trigram tokenizer (3.34+); without it search is LIKE alone."""
    version = tuple(int(p) for p in bind.exec_driver_sql("SELECT sqlite_version()").scalar().split(".")[:3])
    options = {r[0] for r in bind.exec_driver_sql("PRAGMA compile_options")}
    return version >= (3, 34, 0) and "ENABLE_FTS5" in options


def upgrade() -> None:
    op.create_table('run_search',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('digest', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['run_pk'], ['runs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_pk', 'digest', name='uq_run_search_run_digest')
    )
    op.create_table('run_search_marks',
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('step_id', sa.Integer(), nullable=False),
    sa.Column('critic_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['run_pk'], ['runs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('run_pk')
    )
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for trigger in ("runs_fts_au", "runs_fts_ad", "runs_fts_ai"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS runs_fts")
        if _fts5_trigram(bind):
            op.execute("CREATE VIRTUAL TABLE run_search_fts USING fts5(text, content='run_search', "
                       "content_rowid='id', tokenize='trigram')")
            # External content: the index is told the old text to remove. Texts are never
            # updated (a changed text is a new row), so inserts and deletes are all it needs.
            op.execute("CREATE TRIGGER run_search_fts_ai AFTER INSERT ON run_search BEGIN "
                       "INSERT INTO run_search_fts(rowid, text) VALUES (new.id, new.text); END")
            op.execute("CREATE TRIGGER run_search_fts_ad AFTER DELETE ON run_search BEGIN "
                       "INSERT INTO run_search_fts(run_search_fts, rowid, text) VALUES ('delete', old.id, old.text); END")
    from qita_board.models import RUNS
    from qita_board.search import index_run
    from qita_board.search_texts import RUN_DATA_FIELDS, RUN_FIELDS

    pks = [pk for (pk,) in bind.execute(sa.select(RUNS.c.id).order_by(RUNS.c.id))]
    for pk in pks:
        run = bind.execute(sa.select(*[RUNS.c[name] for name in (*RUN_FIELDS, *RUN_DATA_FIELDS)]).where(RUNS.c.id == pk)).mappings().first()
        index_run(bind, pk, run)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for trigger in ("run_search_fts_ad", "run_search_fts_ai"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS run_search_fts")
    op.drop_table('run_search_marks')
    op.drop_table('run_search')
    if bind.dialect.name == "sqlite" and _fts5_trigram(bind):
        # migration 0003's index over the raw run columns, as it was
        cols = "run_id, task_id, objective, final_result, stop_detail"
        new = ", ".join(f"new.{c}" for c in cols.split(", "))
        old = ", ".join(f"old.{c}" for c in cols.split(", "))
        op.execute(f"CREATE VIRTUAL TABLE runs_fts USING fts5({cols}, content='runs', content_rowid='id', "
                   "tokenize='trigram')")
        op.execute(f"CREATE TRIGGER runs_fts_ai AFTER INSERT ON runs BEGIN "
                   f"INSERT INTO runs_fts(rowid, {cols}) VALUES (new.id, {new}); END")
        op.execute(f"CREATE TRIGGER runs_fts_ad AFTER DELETE ON runs BEGIN "
                   f"INSERT INTO runs_fts(runs_fts, rowid, {cols}) VALUES ('delete', old.id, {old}); END")
        changed = " OR ".join(f"old.{c} IS NOT new.{c}" for c in cols.split(", "))
        op.execute(f"CREATE TRIGGER runs_fts_au AFTER UPDATE OF {cols} ON runs WHEN {changed} BEGIN "
                   f"INSERT INTO runs_fts(runs_fts, rowid, {cols}) VALUES ('delete', old.id, {old}); "
                   f"INSERT INTO runs_fts(rowid, {cols}) VALUES (new.id, {new}); END")
        op.execute("INSERT INTO runs_fts(runs_fts) VALUES ('rebuild')")
