"""steps.tool_calls: the tool calls each step made, counted by the reader as it reads the
step (app.ingest.rows.step_tool_calls), so a run's total is a sum. It was computed after
every batch of an ended run by parsing each of its step records again in the database
(SQLite's json functions, PostgreSQL's jsonb): about a fifth of PostgreSQL's ingest time.
Existing steps are counted here by the same rule, in SQL.

Revision ID: 0015
Revises: 0014
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0015'
down_revision: Union[str, None] = '0014'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('steps') as batch:
        batch.add_column(sa.Column('tool_calls', sa.Integer(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        # jsonb refuses \u0000: such a step counts no calls rather than failing the upgrade.
        op.execute("UPDATE steps SET tool_calls = CASE "
                   "WHEN jsonb_typeof(j->'actions') = 'array' AND jsonb_array_length(j->'actions') > 0 "
                   "THEN jsonb_array_length(j->'actions') "
                   "WHEN jsonb_typeof(j#>'{decision,actions}') = 'array' "
                   "AND jsonb_array_length(j#>'{decision,actions}') > 0 THEN jsonb_array_length(j#>'{decision,actions}') "
                   "WHEN jsonb_typeof(j->'tool_invocations') = 'array' THEN jsonb_array_length(j->'tool_invocations') "
                   "WHEN j ? 'tool_invocations' THEN 0 END "
                   "FROM (SELECT id AS sid, record::jsonb AS j FROM steps WHERE strpos(record, '\\u0000') = 0) AS s "
                   "WHERE steps.id = s.sid")
    else:
        # json_array_length is 0 for a value that is not an array and NULL for a missing
        # path; json_valid skips what SQLite's parser refuses (nesting past its limit).
        op.execute("UPDATE steps SET tool_calls = coalesce(nullif(json_array_length(record, '$.actions'), 0), "
                   "nullif(json_array_length(record, '$.decision.actions'), 0), "
                   "json_array_length(record, '$.tool_invocations')) WHERE json_valid(record)")


def downgrade() -> None:
    with op.batch_alter_table('steps') as batch:
        batch.drop_column('tool_calls')
