"""the policy lab's state: per finished run, the cumulative figures after each step and a
digest of its tool calls (lab_runs); per run and criterion, what it can decide live (or
why not) and its first live decision (lab_decisions). Filled off the ingest path by
app.lab.index; deleting a run deletes them.

Revision ID: 0009
Revises: 0007
"""
from typing import Sequence, Union

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0009'
down_revision: Union[str, None] = '0007'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table('lab_decisions',
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('criterion_id', sqlmodel.sql.sqltypes.AutoString(length=400), nullable=False),
    sa.Column('type', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
    sa.Column('polarities', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('verdict', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True),
    sa.Column('step', sa.Integer(), nullable=True),
    sa.Column('tool_call_index', sa.Integer(), nullable=True),
    sa.Column('pass_from_step', sa.Integer(), nullable=True),
    sa.Column('declared', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True),
    sa.Column('decide_within', sa.Integer(), nullable=True),
    sa.Column('gating', sa.Boolean(), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True),
    sa.ForeignKeyConstraint(['run_pk'], ['runs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('run_pk', 'criterion_id')
    )
    op.create_table('lab_runs',
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('run_updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('indexed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('first_step', sa.Integer(), nullable=True),
    sa.Column('step_count', sa.Integer(), nullable=False),
    sa.Column('series', sa.LargeBinary(), nullable=True),
    sa.Column('signatures', sa.JSON(), nullable=True),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['run_pk'], ['runs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('run_pk')
    )
    with op.batch_alter_table('lab_runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_lab_runs_indexed_at'), ['indexed_at'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('lab_runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_lab_runs_indexed_at'))

    op.drop_table('lab_runs')
    op.drop_table('lab_decisions')
