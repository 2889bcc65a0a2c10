"""lab state for a weighted armed gate: lab_decisions.weight (a criterion's weight in it) and
lab_runs.gate_threshold (the share of that weight an early-stopped run needs to pass:
coder_eval's stop_early_gate_threshold). The lab's tables are derived data: they are emptied
so every finished run is indexed again with the new columns.

Revision ID: 0012
Revises: 0011
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0012'
down_revision: Union[str, None] = '0011'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.execute("DELETE FROM lab_decisions")
    op.execute("DELETE FROM lab_runs")
    with op.batch_alter_table('lab_decisions') as batch:
        batch.add_column(sa.Column('weight', sa.Float(), nullable=True))
    with op.batch_alter_table('lab_runs') as batch:
        batch.add_column(sa.Column('gate_threshold', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('lab_runs') as batch:
        batch.drop_column('gate_threshold')
    with op.batch_alter_table('lab_decisions') as batch:
        batch.drop_column('weight')
