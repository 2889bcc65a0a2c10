"""Alembic environment for the board's store.

The board passes its own connection (see app.db.upgrade); the `alembic` command line
reads the URL from alembic.ini or QITA_DB. Batch mode keeps ALTERs working on SQLite.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import engine_from_config, pool
from sqlmodel import SQLModel

import qita_board.models  # registers the tables on SQLModel.metadata

config = context.config
target_metadata = SQLModel.metadata


def _configure(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
        include_name=qita_board.models.include_name,  # the SQLite search index is not in the metadata
        include_object=qita_board.models.include_object(connection.dialect.name),  # migration 0016
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    url = os.environ.get("QITA_DB") or config.get_main_option("sqlalchemy.url")
    if url and "://" not in url:
        url = f"sqlite:///{url}"
    section = {"sqlalchemy.url": url}
    connectable = engine_from_config(section, prefix="sqlalchemy.", poolclass=pool.NullPool)
    with connectable.connect() as conn:
        _configure(conn)


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata,
                      literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
