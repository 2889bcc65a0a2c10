"""drop ingest_sources.head_hash and tail_hash: never written nor read (a source's
identity is its content hash of the bytes read, `content_hash`, and its offset).

Revision ID: 0011
Revises: 0010
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0011'
down_revision: Union[str, None] = '0010'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('ingest_sources') as batch:
        batch.drop_column('head_hash')
        batch.drop_column('tail_hash')


def downgrade() -> None:
    with op.batch_alter_table('ingest_sources') as batch:
        batch.add_column(sa.Column('tail_hash', sa.String(length=64), nullable=True))
        batch.add_column(sa.Column('head_hash', sa.String(length=64), nullable=True))
