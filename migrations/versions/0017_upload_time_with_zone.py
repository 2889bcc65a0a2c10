"""uploads.created_at with its time zone on PostgreSQL, as the model declares it (and as
every other time column is): migration 0007 created it without one, so PostgreSQL handed
back a naive time where SQLite, and the model, say UTC. Stored times are UTC already.

Revision ID: 0017
Revises: 0016
"""
from typing import Sequence, Union

from alembic import op

revision: str = '0017'
down_revision: Union[str, None] = '0016'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE uploads ALTER COLUMN created_at TYPE TIMESTAMP WITH TIME ZONE "
                   "USING created_at AT TIME ZONE 'UTC'")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE uploads ALTER COLUMN created_at TYPE TIMESTAMP WITHOUT TIME ZONE "
                   "USING created_at AT TIME ZONE 'UTC'")
