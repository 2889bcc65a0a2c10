"""run origin and record previews: runs.origin / origin_label (the source that began a run:
other sources may add to it, not change it) and steps.preview / events.preview (large records
with long values cut, so a page never reads a 60 MB record), filled for existing large records

Revision ID: 0006
Revises: 0004
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: Union[str, None] = '0004'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('origin', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('origin_label', sa.Text(), nullable=True))
    with op.batch_alter_table('steps', schema=None) as batch_op:
        batch_op.add_column(sa.Column('preview', sa.Text(), nullable=True))
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('preview', sa.Text(), nullable=True))
    from qita_board.previews import PREVIEW_MIN_CHARS, preview_text

    bind = op.get_bind()
    for table in ("steps", "events"):
        # One large record at a time: ids first, then each record on its own.
        ids = [r[0] for r in bind.execute(sa.text(f"SELECT id FROM {table} WHERE length(record) > :n"),
                                          {"n": PREVIEW_MIN_CHARS})]
        for row_id in ids:
            text = bind.execute(sa.text(f"SELECT record FROM {table} WHERE id = :id"), {"id": row_id}).scalar()
            bind.execute(sa.text(f"UPDATE {table} SET preview = :p WHERE id = :id"),
                         {"p": preview_text(text), "id": row_id})


def downgrade() -> None:
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_column('preview')
    with op.batch_alter_table('steps', schema=None) as batch_op:
        batch_op.drop_column('preview')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('origin_label')
        batch_op.drop_column('origin')
