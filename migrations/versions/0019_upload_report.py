"""uploads.report: the rejected lines and warnings of an upload, kept with it. They lived
only in the upload's job, which the board keeps for a while and forgets at a restart, so
the upload's own page (`/uploads/N`) could not say which lines were left out.

Revision ID: 0019
Revises: 0018
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0019'
down_revision: Union[str, None] = '0018'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("uploads") as batch:
        batch.add_column(sa.Column("report", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("uploads") as batch:
        batch.drop_column("report")
