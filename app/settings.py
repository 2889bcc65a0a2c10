"""Board settings, read from the environment (prefix `QITA_`) and overridden by CLI flags."""

from __future__ import annotations

from typing import Optional

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


class Settings(BaseSettings):
    """Everything the board can be told; one instance per app."""

    model_config = SettingsConfigDict(env_prefix="QITA_", extra="ignore")

    db: str = Field("sqlite:///./qita.db", description="SQLAlchemy URL or a path to a SQLite file")
    host: str = "127.0.0.1"
    port: int = 8765
    token: Optional[str] = Field(None, description="Token required for writes (and reads with read_auth)")
    read_auth: bool = Field(False, description="Require the token for reads too")
    insecure: bool = Field(False, description="Allow a non-loopback bind without a token")
    allowed_hosts: list[str] = Field(default_factory=list, description="Host names the board is reached by (besides "
                                      "its bound address, localhost and IP addresses)")
    trusted_proxies: list[str] = Field(default_factory=list, description="Addresses of reverse proxies whose "
                                        "X-Forwarded-Proto / X-Forwarded-For are believed")
    session_hours: float = Field(12.0, description="How long a sign-in lasts")
    login_failures: int = Field(5, description="Failed sign-ins (or wrong tokens) per client address per minute "
                                                "before further tries are refused with 429")
    body_idle_s: float = Field(30.0, description="A request body that sends nothing for this long is cut off (408)")
    max_concurrent_uploads: int = Field(8, description="Uploads received at once; more get 503 and may retry")
    abandon_after_s: float = Field(300.0, description="A run silent this long with no run_end is abandoned")
    max_line_bytes: int = Field(64 * 1024 * 1024, description="Longest trace line accepted")
    max_upload_bytes: int = Field(1024 * 1024 * 1024, description="Largest upload request accepted")
    max_archive_bytes: int = Field(4 * 1024 * 1024 * 1024, description="Largest total decompressed size of an archive")
    max_archive_ratio: float = Field(200.0, description="Largest decompressed / compressed size of a .gz file, a zip "
                                                        "entry and a whole zip (past the first 16 MiB)")
    max_archive_entries: int = Field(10_000, description="Most entries read from one zip archive")
    batch_lines: int = Field(2000, description="Lines per ingest transaction (a batch also ends after 8 MiB of the file)")
    reader_process_bytes: int = Field(8 * 1024 * 1024, description=(
        "A trace file with at least this many bytes to read is read in a process of its own beside the "
        "writer, on Linux (0: never)"))
    ingest_workers: int = Field(3, description="Write jobs (uploads, watch passes) run at once, taking turns per batch")
    job_budget_s: float = Field(600.0, description="Longest an upload's ingest may run; what was read is kept")
    live_poll_s: float = Field(2.0, description="How often live pages poll for updates")
    page_steps: int = Field(25, description="Steps per lazily loaded block")
    first_page_steps: int = Field(12, description="Steps in the first block of a run page")
    show_secrets: bool = Field(False, description="Never mask secrets (single-user local use)")
    lab_index: bool = Field(True, description=(
        "Index every finished run for the policy lab in the background (off: only the sets the lab is asked for)"))
    watch: list[str] = Field(default_factory=list)

    @property
    def db_url(self) -> str:
        """The database as a SQLAlchemy URL; a bare path means a SQLite file."""
        if "://" in self.db:
            return self.db
        return f"sqlite:///{self.db}"
