"""run accounting as producers report it: cache token buckets, tool calls, agent time and
agent cost beside the end-to-end figures, the producer's own status, the criteria's own
verdict beside a recorded one, a score, and a cost cap

Revision ID: 0004
Revises: 0003
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: Union[str, None] = '0003'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# Plain ADD COLUMN, not batch mode: on SQLite a batch would copy the runs table, and the
# search index's triggers (0003) would not survive the copy.
COLUMNS = (
    ('budget_max_cost_usd', sa.Float()),
    ('criteria_verdict', sa.String(length=20)),
    ('verdict_reason', sa.Text()),
    ('source_status', sa.String(length=100)),
    ('score', sa.Float()),
    ('tokens_cache_read', sa.BigInteger()),
    ('tokens_cache_write', sa.BigInteger()),
    ('tool_calls', sa.Integer()),
    ('agent_cost_usd', sa.Float()),
    ('agent_elapsed_s', sa.Float()),
)


def upgrade() -> None:
    for name, type_ in COLUMNS:
        op.add_column('runs', sa.Column(name, type_, nullable=True))
    op.create_index(op.f('ix_runs_source_status'), 'runs', ['source_status'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_runs_source_status'), table_name='runs')
    for name, _type in reversed(COLUMNS):
        op.drop_column('runs', name)
