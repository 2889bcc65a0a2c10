"""uploads: each upload through the board and the runs it created or added to, so that
everything an upload added can be removed again

Revision ID: 0007
Revises: 0006
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: Union[str, None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table('uploads',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=True),
    sa.Column('files', sa.JSON(), nullable=True),
    sa.Column('source_keys', sa.JSON(), nullable=True),
    sa.Column('records', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('upload_runs',
    sa.Column('upload_id', sa.Integer(), nullable=False),
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('created', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['run_pk'], ['runs.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['upload_id'], ['uploads.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('upload_id', 'run_pk')
    )
    with op.batch_alter_table('upload_runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_upload_runs_run_pk'), ['run_pk'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('upload_runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_upload_runs_run_pk'))
    op.drop_table('upload_runs')
    op.drop_table('uploads')
