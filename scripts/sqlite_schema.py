"""Write migrations/sqlite_head.sql: the schema the migrations build on SQLite, which a new
SQLite database gets at once instead of running them (app.db.create_at_head).

Run it after adding a migration (and moving app.db.SCHEMA_HEAD to it);
tests/app/test_migrations.py fails until the file matches what the migrations build.

    python scripts/sqlite_schema.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from alembic import command

from qita_board.db import SQLITE_HEAD_SQL, alembic_config, make_engine, schema_sql


def build() -> str:
    """The schema text of a new database built by running every migration."""
    with tempfile.TemporaryDirectory() as folder:
        engine = make_engine(f"sqlite:///{Path(folder) / 'head.db'}")
        try:
            cfg = alembic_config(engine)
            with engine.begin() as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
            raw = engine.raw_connection()
            try:
                return schema_sql(raw.driver_connection)
            finally:
                raw.close()
        finally:
            engine.dispose()


if __name__ == "__main__":
    SQLITE_HEAD_SQL.write_text(build(), encoding="utf-8")
    print(f"wrote {SQLITE_HEAD_SQL}")
