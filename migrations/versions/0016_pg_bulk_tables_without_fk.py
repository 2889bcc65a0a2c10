"""PostgreSQL: steps, critic_outputs and events without their foreign key to runs.

PostgreSQL checks a foreign key row by row, with a `SELECT ... FOR KEY SHARE` of the run
for every step, critic output and event copied in: about a third of the server's ingest
time (docs/performance.md, issue 15). The board never relied on the key's cascade (a
run's rows are deleted explicitly, children first: app.removal), and what the check
protected against, a run deleted by another board while its records are being written,
is now guarded once per run and batch instead of once per row: the ingest holds each run
it writes `FOR KEY SHARE` (app.ingest.store.Applier), a delete takes its runs `FOR UPDATE`
first (app.removal.execute), so one waits for the other. SQLite keeps the keys: its check
is a lookup in the run's own table, and dropping a key there means copying the table.

Revision ID: 0016
Revises: 0015
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0016'
down_revision: Union[str, None] = '0015'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

#: The tables an ingest writes row by row (kept in step with app.models.UNCHECKED_ON_POSTGRES).
TABLES = ("steps", "critic_outputs", "events")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    inspector = sa.inspect(bind)
    for table in TABLES:
        for fk in inspector.get_foreign_keys(table):
            if fk["referred_table"] == "runs" and fk.get("name"):
                op.drop_constraint(fk["name"], table, type_="foreignkey")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        # Rows whose run is gone (none, if only the board wrote) would fail the new key.
        op.execute(f"DELETE FROM {table} t WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = t.run_pk)")
        op.create_foreign_key(f"{table}_run_pk_fkey", table, "runs", ["run_pk"], ["id"], ondelete="CASCADE")
