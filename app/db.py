"""Database engines, connection settings and schema upgrades.

No engine is created at import time: `make_engine(settings)` builds one per app or
command. SQLite gets WAL (readers never wait for the writer), a busy timeout and
foreign keys; every start runs the Alembic migrations up to head.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlmodel import create_engine

from .errors import BoardError
from .jsontext import column_load, column_text
from .paths import MIGRATIONS
from .settings import Settings

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger("qita.db")

BUSY_TIMEOUT_MS = 30_000
#: Key of the PostgreSQL advisory lock held while migrating ("qita" in ASCII).
MIGRATION_LOCK = 0x71697461
#: The newest migration's revision. A database stamped with it needs no upgrade, so opening
#: it loads neither Alembic nor the migration scripts: 0.1–0.2 s of every `qita ingest`
#: and `qita board` start (docs/performance.md). tests/app/test_migrations.py holds it to
#: Alembic's own head.
SCHEMA_HEAD = "0019"


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def make_engine(url: str) -> Engine:
    """An engine for `url`, with the connection settings the board relies on."""
    sa_url = make_url(url)
    if sa_url.get_backend_name() == "sqlite":
        database = sa_url.database
        if database and database != ":memory:":
            parent = Path(database).expanduser().resolve().parent
            if not parent.is_dir():
                raise BoardError(f"database folder does not exist: {parent.name or parent}", status=400)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000},
            json_serializer=column_text, json_deserializer=column_load,
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    connect_args = {"connect_timeout": 10, "application_name": "qita-board"} if sa_url.get_backend_name() == "postgresql" else {}
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20, connect_args=connect_args,
                         json_serializer=column_text, json_deserializer=column_load)


#: SQLite's own default: after a commit that leaves the WAL longer than this many pages,
#: the committing connection copies it back into the database (a checkpoint).
AUTOCHECKPOINT_PAGES = 1000
#: WAL size past which the background checkpointer copies it back (`Checkpointer`).
CHECKPOINT_WAL_BYTES = 4 * 1024 * 1024


class Checkpointer:
    """WAL checkpoints of a SQLite file in a thread of their own, for a bulk ingest.

    A checkpoint copies the WAL back into the database file and syncs it; SQLite runs one
    in the committing connection after every commit that leaves the WAL over 1,000 pages,
    so a bulk ingest waited for a copy and an fsync every 4 MB: a third of its commit time
    and a sixth of the writer's (measured on 53 MB of trace: 0.47 s of SQL with them, 0.30 s
    without). With `writing(conn)` around its transactions the ingest commits without them,
    and this thread checkpoints (PASSIVE: never blocking the writer or a reader) while the
    next transaction is built. The connection gets SQLite's default back when the
    transaction ends, so no other writer ever commits without checkpoints."""

    def __init__(self, path: str):
        self.path = path
        self.wal = path + "-wal"
        self._wake = threading.Event()
        self._stop = False
        self.checkpoints = 0
        #: started by the first checkpoint it is asked for (most ingests, a small upload or a
        #: watch pass, never ask for one)
        self._thread: Optional[threading.Thread] = None

    @staticmethod
    def for_engine(engine: Engine) -> Optional["Checkpointer"]:
        """A checkpointer for a SQLite file database, else None."""
        if engine.dialect.name != "sqlite":
            return None
        database = engine.url.database
        if not database or database == ":memory:" or database.startswith("file:"):
            return None
        return Checkpointer(str(Path(database).expanduser().resolve()))

    @contextmanager
    def writing(self, conn: Any) -> Iterator[None]:
        """Around one write transaction on `conn`: it commits without a checkpoint; this
        thread is woken after it when the WAL has grown."""
        # On the driver's connection: through SQLAlchemy the pragma would begin its transaction.
        _driver_pragma(conn, "PRAGMA wal_autocheckpoint=0")
        try:
            yield
        finally:
            _driver_pragma(conn, f"PRAGMA wal_autocheckpoint={AUTOCHECKPOINT_PAGES}")

    def nudge(self) -> None:
        """After a commit: checkpoint if the WAL has grown past CHECKPOINT_WAL_BYTES."""
        try:
            if os.path.getsize(self.wal) < CHECKPOINT_WAL_BYTES:
                return
        except OSError:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="qita-checkpoint", daemon=True)
            self._thread.start()
        self._wake.set()

    def close(self) -> None:
        """Stop after the checkpoint in progress (what is left is checkpointed by the next commit)."""
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        conn = None
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stop:
                    return
                # The GIL is released for the whole checkpoint (copy and fsync).
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                self.checkpoints += 1
        except sqlite3.Error:
            log.debug("background checkpoint failed; the next commit will checkpoint", exc_info=True)
        finally:
            if conn is not None:
                conn.close()


def _driver_pragma(conn: Any, sql: str) -> None:
    cur = conn.connection.dbapi_connection.cursor()
    try:
        cur.execute(sql)
    finally:
        cur.close()


def alembic_config(engine: Engine) -> "Config":
    """An Alembic config pointing at the shipped migrations and the given engine."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%"))
    cfg.attributes["engine"] = engine
    return cfg


def at_head(engine: Engine) -> bool:
    """Whether the database is stamped with the newest migration (`SCHEMA_HEAD`)."""
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            found = conn.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'")
        else:
            found = conn.exec_driver_sql("SELECT 1 FROM information_schema.tables WHERE table_name = 'alembic_version' "
                                         "AND table_schema = current_schema()")
        if found.first() is None:
            return False
        return [r[0] for r in conn.exec_driver_sql("SELECT version_num FROM alembic_version")] == [SCHEMA_HEAD]


#: The schema of a database the migrations built, statement by statement (`schema_sql`): a
#: new SQLite database gets it at once (`create_at_head`). Running the 17 migrations took
#: 0.25–0.35 s of every `qita ingest` into a new file; this takes ~15 ms.
#: tests/app/test_migrations.py holds it to what the migrations build.
SQLITE_HEAD_SQL = MIGRATIONS / "sqlite_head.sql"


def schema_sql(dbapi_conn: sqlite3.Connection) -> str:
    """A SQLite database's schema as the statements that built it, in their order (FTS5's
    shadow tables left out: its CREATE VIRTUAL TABLE makes them), headed by its revision."""
    shadow = {row[1] for row in dbapi_conn.execute("PRAGMA table_list") if row[2] == "shadow"}
    version = dbapi_conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    statements = []
    for name, sql in dbapi_conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"):
        if name not in shadow:
            statements.append(sql)
        if sql and sql.upper().startswith("CREATE VIRTUAL TABLE") and "USING FTS5" in sql.upper():
            # the migration rebuilds its empty index, which writes the index's averages record
            statements.append(f"INSERT INTO {name}({name}) VALUES ('rebuild')")
    return f"-- qita board: the SQLite schema at revision {version}\n" + "".join(f"{sql};\n" for sql in statements)


def _statements(text: str) -> Iterator[str]:
    buf = ""
    for line in text.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            yield buf
            buf = ""


def create_at_head(engine: Engine) -> bool:
    """Give a new, empty SQLite database the newest schema in one transaction
    (`SQLITE_HEAD_SQL`). False, with nothing written, for any other database, or when this
    SQLite cannot build it (no FTS5): the migrations do the work then."""
    if engine.dialect.name != "sqlite" or not SQLITE_HEAD_SQL.is_file():
        return False
    text = SQLITE_HEAD_SQL.read_text(encoding="utf-8")
    if not text.startswith(f"-- qita board: the SQLite schema at revision {SCHEMA_HEAD}\n"):
        return False
    raw = engine.raw_connection()
    try:
        conn = raw.driver_connection
        conn.execute("BEGIN IMMEDIATE")  # a second board opening the same new file waits here
        try:
            if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                conn.rollback()
                return False
            for statement in _statements(text):
                conn.execute(statement)
            conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (SCHEMA_HEAD,))
            conn.commit()
        except sqlite3.Error:
            conn.rollback()
            log.debug("the schema snapshot cannot be built here; running the migrations", exc_info=True)
            return False
    finally:
        raw.close()
    return True


def upgrade(engine: Engine) -> None:
    """Bring the database schema up to the newest migration (nothing to load when it is there)."""
    if at_head(engine) or create_at_head(engine):
        return
    from alembic import command

    cfg = alembic_config(engine)
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Several boards starting together on one server: one migrates, the others wait.
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def open_database(settings: Settings) -> Engine:
    """Create the engine for `settings.db` and upgrade its schema; clear errors when it cannot."""
    engine = make_engine(settings.db_url)
    try:
        upgrade(engine)
        check_writable(engine)
    except BoardError:
        raise
    except Exception as exc:  # surface disk/permission problems as one clear line
        engine.dispose()
        reason = _readonly_folder(engine) or describe_db_error(exc)
        raise BoardError(f"cannot open database: {reason}", status=500) from exc
    return engine


def _readonly_folder(engine: Engine) -> Optional[str]:
    """For SQLite: say so when the database's folder (or its file system) cannot be written."""
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:":
        return None
    folder = Path(database).expanduser().resolve().parent
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "the database is on a read-only file system"
    except OSError:
        return None
    if not os.access(folder, os.W_OK):
        return "the database folder is read-only (the board writes the database and its -wal/-shm files there)"
    return None


def check_writable(engine: Engine) -> None:
    """Fail now, with a clear message, if the database cannot be written (read-only file or disk)."""
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = version_num")
        finally:
            trans.rollback()


def describe_db_error(exc: BaseException) -> str:
    """A one-line explanation of a database error, without server paths."""
    text = str(getattr(exc, "orig", None) or exc).splitlines()[0] if str(exc) else type(exc).__name__
    low = text.lower()
    if "readonly" in low or "read-only" in low:
        return "the database is read-only (check the file's permissions)"
    if "disk" in low and "full" in low or "no space" in low:
        return "the disk is full"
    if "unable to open" in low:
        return "the database file cannot be opened (check the path and permissions)"
    if "locked" in low:
        return "the database is locked by another process"
    if "connection refused" in low or "could not connect" in low or "timeout expired" in low or "connection failed" in low:
        return "cannot reach the database server (is it running, and is the address right?)"
    if "password authentication failed" in low or "no pg_hba.conf entry" in low or "role" in low and "does not exist" in low:
        return "the database server refused the login (check the user and password in the URL)"
    if "database" in low and "does not exist" in low:
        return "the database does not exist on the server (create it first)"
    return _strip_paths(text[:300])


def _strip_paths(text: str) -> str:
    """Remove anything that looks like a file path from a driver message."""
    import re

    return re.sub(r"(?:[A-Za-z]:)?[\\/](?:[^\s'\"]+[\\/])+[^\s'\"]*", "<path>", text)
