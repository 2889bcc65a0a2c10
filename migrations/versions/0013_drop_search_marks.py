"""drop run_search_marks: search indexes each batch's critic and step texts from the records
as they are read (app.ingest.batch, app.search.index_batch), so it no longer reads them back
from the store and keeps no marks of how far it has read.

Revision ID: 0013
Revises: 0012
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0013'
down_revision: Union[str, None] = '0012'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.drop_table('run_search_marks')


def downgrade() -> None:
    # Marks at 0: the older code reads back a run's rows from the start, adding its texts
    # again as one more document (duplicates in the index, nothing lost).
    op.create_table('run_search_marks',
    sa.Column('run_pk', sa.Integer(), nullable=False),
    sa.Column('step_id', sa.Integer(), nullable=False),
    sa.Column('critic_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['run_pk'], ['runs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('run_pk')
    )
