"""The `qita` command line: ingest traces, serve the board, run the demo experiment."""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path
from typing import Any, NoReturn, Optional

import click
import orjson

from .errors import BoardError
from .settings import LOOPBACK_HOSTS, Settings
from .words import plural

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
#: Seconds open requests get to finish once `qita board` is told to stop.
GRACEFUL_S = 2


def _settings(**overrides: Any) -> Settings:
    """Settings from the environment (QITA_*), overridden by the flags that were given."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})


#: Set by `run`, the `qita` program's entry point (not by a test calling `main` in-process).
_PROGRAM = False


def run() -> None:
    """The `qita` program: `main`, ending with `_exit`'s quick exit where a command asks for it."""
    global _PROGRAM
    _PROGRAM = True
    main()


def _exit(code: int) -> NoReturn:
    """End the command with `code`. As the `qita` program, the exit handlers run (temporary
    folders, logging) and then the process ends at once: tearing down the interpreter's
    modules and objects took 0.15–0.3 s after every `qita ingest`, a tenth of a 100 MB
    ingest (docs/performance.md). Inside a test's runner this is `sys.exit`."""
    if _PROGRAM:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)


def _fail(message: str, code: int = 1) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@click.group(context_settings=CONTEXT)
@click.version_option(package_name="qita-board", prog_name="qita")
def main() -> None:
    """qita board: a trace viewer for AI-agent runs.

    \b
    Example:
        qita demo && qita board
    """


class _Progress:
    """A byte-based progress bar on a terminal; nothing when output is piped."""

    def __init__(self, total: int, enabled: bool):
        self.bar = None
        if enabled and total > 0:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

            self.bar = Progress(TextColumn("ingesting"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                                TimeRemainingColumn(), transient=True, console=Console(stderr=True))
            self.task = self.bar.add_task("ingest", total=total)
            self.bar.start()

    def advance(self, n: int) -> None:
        if self.bar is not None and n > 0:
            self.bar.advance(self.task, n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def run_ingest(settings: Settings, paths: list[str], *, progress: bool, stop: "Any" = None) -> "Any":
    """Open the database, ingest `paths`, return the report (shared by ingest, board and demo).

    `stop`: polled between lines; True ends the ingest with `app.ingest.Stopped` after the
    last whole batch (see app.signals).
    """
    from . import tempfiles
    from .ingest import early as early_readers
    from .ingest.sources import discover

    tempfiles.remove_stale()  # what a crashed board or ingest left behind
    found = discover(paths, settings=settings)
    try:
        # Before the database layer is imported: the first large file is read meanwhile.
        with early_readers.start(found, settings) as early:
            from .db import open_database
            from .ingest import Ingestor

            engine = open_database(settings)
            try:
                bar = _Progress(found.total_bytes, progress and sys.stderr.isatty() and found.total_bytes > 1 << 20)
                try:
                    return Ingestor(engine, settings, progress=bar.advance, stop=stop).ingest_discovery(found,
                                                                                                       early=early)
                finally:
                    bar.close()
            finally:
                engine.dispose()
    finally:
        found.remove_temporary()


def _ingest_until_stopped(settings: Settings, paths: list[str], *, progress: bool) -> "Any":
    """run_ingest under stop signals: on SIGINT/SIGTERM, say what was kept and exit 128 + signal."""
    from .ingest import Stopped
    from .signals import StopSignals

    with StopSignals() as signals:
        try:
            return run_ingest(settings, paths, progress=progress, stop=signals.requested)
        except Stopped:
            click.echo("stopped: every batch written before the signal is kept; run the same command again "
                       "to go on from there", err=True)
            sys.exit(signals.exit_code)


def _print_report(report: Any, as_json: bool) -> None:
    if as_json:
        click.echo(orjson.dumps(report.to_json()).decode())
    else:
        for issue in report.errors:
            click.echo(str(issue), err=True)
        for issue in report.warnings:
            click.echo(f"warning: {issue}", err=True)
        unchanged = report.runs_unchanged
        click.echo(
            f"{plural(report.records, 'record')} from {plural(report.files, 'file')}: "
            f"{plural(len(report.run_ids), 'run')} ({len(report.created)} new), {len(report.errors)} rejected"
            + (f"; {plural(len(unchanged), 'run')} already stored from another source, unchanged" if unchanged else "")
        )


@main.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True)
@click.option("--db", help="Database: a SQLAlchemy URL or a SQLite file path [env QITA_DB; default ./qita.db]")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary object instead of text.")
def ingest(paths: tuple[str, ...], db: Optional[str], as_json: bool) -> None:
    """Ingest trace files, folders (recursively), archives or globs into the database.

    Reads qita JSONL (.jsonl, .jsonl.gz), QitOS run folders, coder_eval results
    folders and .zip archives of those. Ingesting the same file again adds nothing;
    a file that grew is read from where the last pass stopped.

    Exit status: 0 when everything was ingested, 1 when any line or file was
    rejected (the rest is kept), 2 on a usage error: a path that does not exist,
    or one that holds nothing the board can read.

    \b
    Example:
        qita ingest runs/ 'more/*.jsonl.gz' --db sqlite:///qita.db --json
    """
    settings = _settings(db=db)
    missing = [p for p in paths if not os.path.exists(p) and not _glob_matches(p)]
    if missing:
        raise click.UsageError(f"no such file or folder: {', '.join(missing)}")
    try:
        report = _ingest_until_stopped(settings, list(paths), progress=not as_json)
    except BoardError as exc:
        _fail(exc.message)
        return
    _print_report(report, as_json)
    _exit(2 if report.empty else 0 if report.ok else 1)


def _glob_matches(pattern: str) -> bool:
    import glob

    return glob.has_magic(pattern) and bool(glob.glob(pattern, recursive=True))


@main.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1)
@click.option("--db", help="Database: a SQLAlchemy URL or a SQLite file path [env QITA_DB; default ./qita.db]")
@click.option("--host", help="Address to bind [env QITA_HOST; default 127.0.0.1]")
@click.option("--port", type=int, help="Port [env QITA_PORT; default 8765]")
@click.option("--watch", "watch", multiple=True, type=click.Path(file_okay=False),
              help="Folder to keep ingesting while serving (repeatable).")
@click.option("--token", help="Token required for writes (uploads, deletes) [env QITA_TOKEN].")
@click.option("--read-auth", is_flag=True, default=None, help="Require the token for reads too [env QITA_READ_AUTH].")
@click.option("--insecure", is_flag=True, default=None, help="Allow a non-loopback address without a token.")
def board(paths: tuple[str, ...], db: Optional[str], host: Optional[str], port: Optional[int], watch: tuple[str, ...],
          token: Optional[str], read_auth: Optional[bool], insecure: Optional[bool]) -> None:
    """Ingest PATHS (if any), then serve the board in the browser.

    Binds 127.0.0.1 by default. Any other address needs --token (or QITA_TOKEN),
    or an explicit --insecure.

    \b
    Example:
        qita board runs/ --watch runs/ --port 8765
    """
    settings = _settings(db=db, host=host, port=port, token=token, read_auth=read_auth, insecure=insecure,
                         watch=list(watch) or None)
    if settings.host not in LOOPBACK_HOSTS and not settings.token and not settings.insecure:
        _fail(f"refusing to listen on {settings.host} without a token: pass --token (or set QITA_TOKEN), "
              "or --insecure to serve without one", code=2)
    for folder in settings.watch:
        if not os.path.isdir(folder):
            raise click.UsageError(f"--watch: no such folder: {folder}")
    try:
        if paths:
            missing = [p for p in paths if not os.path.exists(p) and not _glob_matches(p)]
            if missing:
                raise click.UsageError(f"no such file or folder: {', '.join(missing)}")
            report = _ingest_until_stopped(settings, list(paths), progress=True)
            _print_report(report, False)
        from .main import create_app

        app = create_app(settings)
    except BoardError as exc:
        _fail(exc.message)
        return
    import uvicorn

    shown = f"[{settings.host}]" if ":" in settings.host else settings.host
    click.echo(f"qita board on http://{shown}:{settings.port}/  (database: {_db_label(settings)})", err=True)
    # A stop signal: uvicorn stops listening, gives open requests GRACEFUL_S, then the app's
    # shutdown stops the writer (2 s): the board is gone within the 5 s a stop may take.
    # Then uvicorn sends the signal again, to the handler it found: status 130 for Ctrl-C.
    from .program import stop_quietly

    stop_quietly()
    uvicorn.run(app, host=settings.host.strip("[]"), port=settings.port, log_level="warning", proxy_headers=False,
                timeout_graceful_shutdown=GRACEFUL_S)


@main.command(context_settings=CONTEXT)
@click.option("--experiment", "experiment", help="Experiment whose two variants are compared.")
@click.option("--a", "a", help="First variant (the cheap one, e.g. smoke).")
@click.option("--b", "b", help="Second variant (the reference, e.g. e2e).")
@click.option("--a-tag", help="Compare two tags instead: the first tag.")
@click.option("--b-tag", help="The second tag.")
@click.option("--group", help="Split the pairs by tag, deciding_criterion, criterion_type, stop_reason or meta:KEY.")
@click.option("--db", help="Database: a SQLAlchemy URL or a SQLite file path [env QITA_DB; default ./qita.db]")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON (the same as /api/compare).")
@click.option("--md", "as_md", is_flag=True, help="Print Markdown for a pull request (the same as format=md).")
@click.option("--csv", "as_csv", is_flag=True, help="Print the per-pair table as CSV.")
@click.option("--base-url", default="http://127.0.0.1:8765", show_default=True,
              help="Where the board is served, for the links in the Markdown.")
def compare(experiment: Optional[str], a: Optional[str], b: Optional[str], a_tag: Optional[str], b_tag: Optional[str],
            group: Optional[str], db: Optional[str], as_json: bool, as_md: bool, as_csv: bool, base_url: str) -> None:
    """Compare two variants of an experiment (or two tags): does the cheap run give the same
    verdicts as the full run, how sure is that, and how much did it save?

    Without a format flag, prints the headline, the McNemar test and the savings with
    their 95% intervals. Exit status 0, or 2 when the groups do not exist.

    \b
    Example:
        qita compare --experiment smoke-vs-e2e --a smoke --b e2e --md > compare.md
    """
    from sqlmodel import Session

    from . import compare as compare_rules
    from . import compare_export
    from .compare import MEASURES
    from .db import open_database
    from .queries import comparison
    from .secrets import Masker

    if sum((as_json, as_md, as_csv)) > 1:
        raise click.UsageError("choose one of --json, --md and --csv")
    settings = _settings(db=db)
    engine = open_database(settings)
    try:
        with Session(engine) as session:
            groups = comparison.resolve_groups(session, experiment=experiment, a=a, b=b, a_experiment=None,
                                               b_experiment=None, a_tag=a_tag, b_tag=b_tag)
            if groups is None:
                _fail("nothing to compare: no experiment has two variants (give --experiment, --a and --b)", code=2)
                return
            ga, gb = groups
            data = Masker().data(comparison.comparison(session, ga, gb, group=compare_rules.check_group_by(group)))
    except BoardError as exc:
        _fail(exc.message, code=2 if exc.status in (400, 404) else 1)
        return
    finally:
        engine.dispose()
    if not data["pairs"] and not data["unpaired"]["a"] and not data["unpaired"]["b"]:
        _fail(f"no runs in {ga.description} nor in {gb.description}", code=2)
        return
    if as_json:
        from .jsontext import dumps

        click.echo(dumps(data).decode())
    elif as_md:
        click.echo(compare_export.markdown(data, base_url=base_url, label_a=ga.label, label_b=gb.label,
                                           description=f"{ga.description} against {gb.description}"))
    elif as_csv:
        click.echo(compare_export.csv_text(data), nl=False)
    else:
        s = data["summary"]
        click.echo(data["headline"])
        click.echo(s["mcnemar"]["reading"])
        for name, _col, label in MEASURES:
            m = s[name]
            if m["saved_pct"] is None:
                continue
            ci = f" (95% CI {m['low']:.0f}% to {m['high']:.0f}%)" if m.get("low") is not None else ""
            left = f" ({plural(m['missing'], 'pair')} without it)" if m.get("missing") else ""
            click.echo(f"  {label}: {m['saved_pct']:.0f}% saved{ci} over {plural(m['pairs'], 'pair')}{left}")
        flagged = [p for p in data["pairs"] if p["flags"]]
        for p in flagged:
            click.echo(f"  flag {p['task_id']}#{p['replicate']}: " + "; ".join(f["text"] for f in p["flags"]))


@main.command(context_settings=CONTEXT)
@click.option("--experiment", help="Experiment whose runs are simulated over.")
@click.option("--variant", help="Its variant that ran to the end (e.g. e2e).")
@click.option("--tag", help="Simulate over the runs with this tag instead (or as well).")
@click.option("--arm", "arm", multiple=True, metavar="ID:WHEN",
              help="Arm a criterion: ID:pass, ID:fail or ID:decided (repeatable; the last colon separates).")
@click.option("--declared", is_flag=True, help="Arm each run as its own criteria declare (the default without --arm).")
@click.option("--without", multiple=True, metavar="ID", help="With --declared: leave this criterion unarmed (repeatable).")
@click.option("--rule", type=click.Choice(["auto", "all", "gate"]), default="auto", show_default=True,
              help="all: every armed criterion decided (qita); gate: coder_eval's; auto: the runs' producer's.")
@click.option("--min-steps", type=click.IntRange(0), help="Never stop early before this many steps.")
@click.option("--max-steps", type=click.IntRange(1), help="Cap: stop (and fail) after this many steps.")
@click.option("--max-tokens", type=click.FloatRange(min=1), help="Cap: stop (and fail) once over this many tokens.")
@click.option("--max-seconds", type=click.FloatRange(min=0, min_open=True), help="Cap: stop (and fail) once over this time.")
@click.option("--measure", type=click.Choice(["tokens", "steps", "agent_s", "cost_usd", "elapsed_s", "tool_calls"]),
              default="tokens", show_default=True, help="The saving the frontier ranks policies by.")
@click.option("--db", help="Database: a SQLAlchemy URL or a SQLite file path [env QITA_DB; default ./qita.db]")
@click.option("--json", "as_json", is_flag=True, help="Print what /api/lab answers, with the frontier of /api/lab/frontier.")
@click.option("--md", "as_md", is_flag=True, help="Print Markdown for a pull request.")
@click.option("--base-url", default="http://127.0.0.1:8765", show_default=True,
              help="Where the board is served, for the links in the Markdown.")
def whatif(experiment: Optional[str], variant: Optional[str], tag: Optional[str], arm: tuple[str, ...], declared: bool,
           without: tuple[str, ...], rule: str, min_steps: Optional[int], max_steps: Optional[int],
           max_tokens: Optional[float], max_seconds: Optional[float], measure: str, db: Optional[str], as_json: bool,
           as_md: bool, base_url: str) -> None:
    """What would an early-stop policy have done to recorded full runs? Simulate it: where
    each run would have stopped, the verdict it would then have had, what it would have
    saved, and how many verdicts it would have flipped (with intervals); smoke's own
    policy against the recorded smoke runs when the experiment has them; the recommended
    policy of the frontier.

    Runs not yet indexed for the lab are indexed first. Exit status 0; 2 when the arming
    is refused (a criterion that cannot be evaluated live, or a polarity it cannot
    decide: the reason is printed) or the set holds no finished full run.

    \b
    Example:
        qita whatif --experiment demo-early-stop-ab --variant e2e --arm skill:decided --min-steps 2
    """
    from sqlmodel import Session

    from .db import open_database
    from .lab import export, view
    from .lab.index import index_pending
    from .queries.run_list import RunFilters, run_conditions
    from .secrets import Masker

    if as_json and as_md:
        raise click.UsageError("choose one of --json and --md")
    settings = _settings(db=db)
    engine = open_database(settings)
    filters = RunFilters(experiment=experiment, variant=variant, tag=tag)
    args = view.PolicyArgs(arm=arm, declared=declared, without=without, rule=rule, min_steps=min_steps,
                           max_steps=max_steps, max_tokens=max_tokens, max_seconds=max_seconds)
    try:
        with Session(engine) as session:
            shown, _ = view.default_filters(session, filters)
            where = run_conditions(session, filters=shown)
        index_pending(engine, where=view.index_scope(shown, where))
        with Session(engine) as session:
            data = Masker().data(view.lab(session, filters=filters, args=args, measure=measure))
    except BoardError as exc:
        _fail(exc.message, code=2 if exc.status in (400, 404) else 1)
        return
    finally:
        engine.dispose()
    if not data["set"]["simulated"]:
        _fail(f"no finished full run to simulate over in {data['set']['description']} "
              f"({data['set']['runs']} runs, {data['set']['early_stopped']} stopped early)", code=2)
        return
    if as_json:
        from .jsontext import dumps

        click.echo(dumps(data).decode())
    elif as_md:
        click.echo(export.markdown(data, base_url=base_url), nl=False)
    else:
        _print_whatif(data)


def _print_whatif(data: dict[str, Any]) -> None:
    from .compare import MEASURES

    s = data["summary"]
    fp, ff = s["false_passes"], s["false_fails"]
    click.echo(f"Policy: {data['policy']['label']} — simulated over {data['set']['simulated']} full runs "
               f"({data['set']['description']})")
    click.echo(data["headline"])

    def pct(x: Optional[float]) -> str:
        return "—" if x is None else f"{100 * x:.0f}%"
    if fp["rate"] is not None:
        click.echo(f"  false passes: {fp['count']} of {fp['of']} ({pct(fp['rate'])}, 95% CI {pct(fp['low'])}–"
                   f"{pct(fp['high'])}; at most {pct(fp['upper'])}, one-sided 95%)")
        click.echo(f"  false fails: {ff['count']} of {ff['of']} ({pct(ff['rate'])}, 95% CI {pct(ff['low'])}–"
                   f"{pct(ff['high'])})")
    click.echo(f"  runs cut: {s['cut']} of {s['paired']}" + "".join(f", {r} {n}" for r, n in s["cut_by"].items()))
    for name, _col, label in MEASURES:
        m = s[name]
        if m["saved_pct"] is None:
            continue
        ci = f" (95% CI {m['low']:.0f}% to {m['high']:.0f}%)" if m.get("low") is not None else ""
        left = f" ({plural(m['missing'], 'run')} without it)" if m.get("missing") else ""
        click.echo(f"  {label}: {m['saved_pct']:.0f}% saved{ci} over {plural(m['pairs'], 'run')}{left}")
    v = data.get("validation")
    if v:
        click.echo(f"Against the recorded {v['variant']} runs: {v['matched']} of {plural(v['paired'], 'pair')} match "
                   f"in stop step and verdict")
        for r in v["pairs"]:
            if not r["match"]:
                click.echo(f"  {r['task_id']}#{r['replicate']}: {r['why']['text'] if r['why'] else ''}")
    best = (data.get("frontier") or {}).get("recommended")
    if best:
        click.echo(f"Recommended: {best['label']} — {best['saved_pct']:.0f}% of the {data['frontier']['measure']} "
                   f"saved, no false pass in {best['graded']} runs (rate at most {pct(best['false_passes']['upper'])})")
    if data["indexing"]["pending"]:
        click.echo(f"({data['indexing']['pending']} runs of this set are not indexed yet)")


def _has_experiment(settings: Settings, experiment: str) -> bool:
    from sqlalchemy import select

    from .db import open_database
    from .models import RUNS

    engine = open_database(settings)
    try:
        with engine.connect() as conn:
            return conn.execute(select(RUNS.c.id).where(RUNS.c.experiment == experiment).limit(1)).first() is not None
    finally:
        engine.dispose()


def _db_label(settings: Settings) -> str:
    url = settings.db_url
    if url.startswith("sqlite"):
        return url.split("///", 1)[-1] or url
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


@main.command(context_settings=CONTEXT)
@click.option("--db", help="Database to ingest the demo into [env QITA_DB; default ./qita.db]")
@click.option("--out", type=click.Path(file_okay=False), default="demo-traces", show_default=True,
              help="Folder for the demo's trace files.")
@click.option("--tasks", type=click.IntRange(1, 10_000), default=24, show_default=True, help="Tasks in the experiment.")
@click.option("--force", is_flag=True, help="Run the experiment again even if the database already holds it.")
def demo(db: Optional[str], out: str, tasks: int, force: bool) -> None:
    """Run the demo smoke-vs-e2e experiment with scripted agents and ingest its traces.

    No network and no model: deterministic scripted agents run every task twice,
    as `smoke` (early stop on) and `e2e` (full run).

    \b
    Example:
        qita demo --tasks 24 --out demo-traces && qita board
    """
    from qita.demo import EXPERIMENT, run_demo

    settings = _settings(db=db)
    try:
        if not force and _has_experiment(settings, EXPERIMENT):
            click.echo(f"the database already holds the demo experiment {EXPERIMENT!r}: nothing to do (--force runs it again)")
            return
        files = run_demo(Path(out), tasks=tasks)
        report = run_ingest(settings, [str(f) for f in files], progress=True)
    except BoardError as exc:
        _fail(exc.message)
        return
    _print_report(report, False)
    sys.exit(0 if report.ok else 1)


@main.command(context_settings=CONTEXT)
@click.argument("run_ids", nargs=-1)
@click.option("--upload", "upload_id", type=click.IntRange(1), help="Delete the runs this upload created (see /uploads).")
@click.option("--db", help="Database: a SQLAlchemy URL or a SQLite file path [env QITA_DB; default ./qita.db]")
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation on a terminal.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def delete(run_ids: tuple[str, ...], upload_id: Optional[int], db: Optional[str], dry_run: bool, yes: bool,
           as_json: bool) -> None:
    """Delete runs by id, or everything an upload added, with every row of them.

    Only the named runs and their rows go (steps, critic outputs, events, criteria,
    early-stop record, tags); other runs and the trace files stay. Deleting an upload
    removes the runs it created and keeps the runs it only added records to.

    Exit status: 0 when done, 1 when a run id or the upload is not found (nothing is
    deleted then), 2 on a usage error. A board serving the same database sees the
    change at once; one that is ingesting a deleted run's file may need a restart.

    \b
    Example:
        qita delete smoke/task-7/0 --dry-run && qita delete smoke/task-7/0 --yes
    """
    from . import removal
    from .db import open_database

    if bool(run_ids) == bool(upload_id):
        raise click.UsageError("name run ids, or one --upload ID (not both)")
    settings = _settings(db=db)
    try:
        engine = open_database(settings)
    except BoardError as exc:
        _fail(exc.message)
        return
    try:
        with engine.begin() as conn:
            plan = removal.plan_upload(conn, upload_id=upload_id) if upload_id else removal.plan_runs(conn, run_ids=list(run_ids))
            if plan is None or plan["missing"]:
                what = f"no upload #{upload_id}" if plan is None else f"no run with id {', '.join(map(repr, plan['missing']))}"
                _fail(f"{what}: nothing deleted")
                return
            if not dry_run and not yes and not as_json and sys.stdin.isatty():
                _print_plan(removal.public(plan), as_json=False)
                if not click.confirm("delete these?", default=False):
                    click.echo("nothing deleted")
                    return
            result = removal.public(plan) if dry_run else removal.execute(conn, plan, upload_id=upload_id)
    finally:
        engine.dispose()
    _print_plan(result, as_json)


def _print_plan(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(orjson.dumps(result, default=str).decode())
        return
    rows = result["rows"] if result["dry_run"] else result["removed"]
    verb = "would delete" if result["dry_run"] else "deleted"
    for run in result["runs"]:
        click.echo(f"{verb} run {run['run_id']} ({run['steps']} steps)")
    for run in result.get("kept") or []:
        click.echo(f"keeps run {run['run_id']} (the upload only added records to it)")
    counts = ", ".join(f"{n} {name}" for name, n in rows.items() if n)
    click.echo(f"{verb}: {counts or 'nothing'}")


if __name__ == "__main__":  # pragma: no cover
    # the installed program's own entry point (tests and benchmarks start `python -m qita_board.cli`)
    from .program import run as program

    program()
