"""list and lane indexes: runs.updated_at (the list cache's data version), runs (experiment,
started_at), and a covering index for a run's verdict lane

Revision ID: 0002
Revises: 0001
"""
from typing import Sequence, Union

from alembic import op

revision: str = '0002'
down_revision: Union[str, None] = '0001'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_runs_updated_at'), ['updated_at'], unique=False)
        batch_op.create_index('ix_runs_experiment_started', ['experiment', 'started_at'], unique=False)
    with op.batch_alter_table('steps', schema=None) as batch_op:
        batch_op.create_index('ix_steps_lane', ['run_pk', 'step', 'critic_action', 'critic_score', 'retry'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('steps', schema=None) as batch_op:
        batch_op.drop_index('ix_steps_lane')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_experiment_started')
        batch_op.drop_index(batch_op.f('ix_runs_updated_at'))
