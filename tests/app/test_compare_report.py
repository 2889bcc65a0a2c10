"""A comparison a reviewer can trust: flags, replicates, groups, Markdown, CSV and the CLI,
on a crafted experiment whose every figure is worked out by hand below."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any, Optional

import pytest

from qita_board.compare_export import md
from tests.conftest import write_jsonl

pytestmark = pytest.mark.both_backends

CRITERIA = [{"id": "c_skill", "type": "skill_triggered", "stop_when": "decided"},
            {"id": "c_cmd", "type": "command_executed", "stop_when": "decided"},
            {"id": "c_note", "type": "file_exists"}]


def run(run_id: str, task: str, variant: str, rep: int, *, verdict: str, steps: int, early: Optional[str] = None,
        deciding: Optional[str] = None, note_passed: bool = True, scenario: str, tags: list[str],
        deciding_step: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"type": "run_start", "run_id": run_id, "ts": "2026-02-01T10:00:00Z", "experiment": "grp", "variant": variant,
         "task_id": task, "replicate": rep, "early_stop": {"enabled": variant == "smoke"}, "tags": tags,
         "metadata": {"scenario": scenario}, "criteria": CRITERIA}]
    for i in range(steps):
        rec = {"type": "step", "run_id": run_id, "step": i, "tokens": {"total": 10},
               "actions": [{"name": "bash", "args": {"command": f"step {i}"}}], "action_results": [{"returncode": 0}],
               "tool_invocations": [{"tool_name": "bash", "call_index": i + 1}]}
        if deciding_step and i == steps - 1:
            rec.update(deciding_step)
        out.append(rec)
    out += [{"type": "criterion", "run_id": run_id, "id": "c_skill", "score": 1.0},
            {"type": "criterion", "run_id": run_id, "id": "c_cmd", "score": 1.0 if verdict == "pass" else 0.0},
            {"type": "criterion", "run_id": run_id, "id": "c_note", "score": 1.0 if note_passed else 0.0}]
    if early:
        out.append({"type": "early_stop", "run_id": run_id, "reason": early, "deciding_criterion": deciding,
                    "armed_criteria": ["c_skill", "c_cmd"], "step": steps - 1, "tool_call_index": steps})
    out.append({"type": "run_end", "run_id": run_id, "ts": "2026-02-01T10:01:00Z", "status": "completed",
                "stop_reason": "early_stop" if early else "final", "verdict": verdict, "steps": steps,
                "tokens": {"total": 10 * steps}, "elapsed_s": float(steps), "cost_usd": 0.01 * steps})
    return out


def grouped_experiment(path: Path) -> Path:
    """smoke (a) vs e2e (b) of experiment `grp`.

    pair   scenario tags    smoke                                   e2e              agree  flags
    r1#0   alpha    x       pass, early on c_skill, 2 steps          pass, 6 steps    yes    —
    r1#1   alpha    x       pass, early on c_skill, 2 steps          fail, 8 steps    NO     premature pass (c_cmd:
                                                                                             armed, undecided; c_note)
    r2#0   alpha    x, y    fail, early on c_cmd, 1 step             fail, 5 steps    yes    —
    r3#0   beta     y       pass, ran to the end, 4 steps            pass, 4 steps    yes    —
    r4#0   beta     —       pass, early on c_cmd, 3 steps; on the    fail, 9 steps    NO     critic objected,
                            deciding step pytest exited 1 and a                              deciding call failed,
                            critic said retry                                                premature pass (c_note)
    e2e r1 is flaky: pass in replicate 0, fail in replicate 1.
    """
    retry_step = {"actions": [{"name": "bash", "args": {"command": "pytest -q"}}],
                  "action_results": [{"returncode": 1, "stderr": "1 failed"}],
                  "tool_invocations": [{"tool_name": "bash", "call_index": 3}],
                  "critic_outputs": [{"critic": "ReturnCodeCritic", "action": "retry", "reason": "command failed with returncode=1",
                                      "score": 0.0},
                                     {"critic": "Progress", "action": "continue", "reason": "fine", "score": 1.0}]}
    recs: list[dict[str, Any]] = []
    recs += run("s-r1-0", "r1", "smoke", 0, verdict="pass", steps=2, early="criterion_passed", deciding="c_skill",
                scenario="alpha", tags=["x"])
    recs += run("e-r1-0", "r1", "e2e", 0, verdict="pass", steps=6, scenario="alpha", tags=["x"])
    recs += run("s-r1-1", "r1", "smoke", 1, verdict="pass", steps=2, early="criterion_passed", deciding="c_skill",
                scenario="alpha", tags=["x"], note_passed=False)
    recs += run("e-r1-1", "r1", "e2e", 1, verdict="fail", steps=8, scenario="alpha", tags=["x"], note_passed=False)
    recs += run("s-r2-0", "r2", "smoke", 0, verdict="fail", steps=1, early="criterion_failed", deciding="c_cmd",
                scenario="alpha", tags=["x", "y"])
    recs += run("e-r2-0", "r2", "e2e", 0, verdict="fail", steps=5, scenario="alpha", tags=["x", "y"])
    recs += run("s-r3-0", "r3", "smoke", 0, verdict="pass", steps=4, scenario="beta", tags=["y"])
    recs += run("e-r3-0", "r3", "e2e", 0, verdict="pass", steps=4, scenario="beta", tags=["y"])
    recs += run("s-r4-0", "r4", "smoke", 0, verdict="pass", steps=3, early="criterion_passed", deciding="c_cmd",
                scenario="beta", tags=[], deciding_step=retry_step)
    recs += run("e-r4-0", "r4", "e2e", 0, verdict="fail", steps=9, scenario="beta", tags=[], note_passed=False)
    return write_jsonl(path, recs)


BASE = {"experiment": "grp", "a": "smoke", "b": "e2e"}


@pytest.fixture
def grp(ingest, tmp_path):
    report = ingest(grouped_experiment(tmp_path / "grp.jsonl"))
    assert report.ok, report.errors
    return report


def test_statistics_replicates_and_flags(client, grp):
    data = client.get("/api/compare", params=BASE).json()
    s = data["summary"]
    assert (s["paired"], s["tasks"]) == (5, 4)
    assert s["confusion"] == {"pass_pass": 2, "pass_fail": 2, "fail_pass": 0, "fail_fail": 1}
    # 3 of 5 agree; McNemar on 2 vs 0 discordant: 2 * 0.5^2 = 0.5
    assert (s["agreement"]["agree"], s["agreement"]["total"]) == (3, 5)
    assert s["mcnemar"]["p_value"] == pytest.approx(0.5) and s["mcnemar"]["discordant"] == 2
    rep = data["replicates"]
    assert rep["flaky_a"] == [] and rep["flaky_b"] == ["r1"]
    assert rep["flaky_pairs"] == 2 and (rep["agreement_without_flaky"]["agree"], rep["agreement_without_flaky"]["total"]) == (2, 3)
    assert (rep["tasks"], rep["tasks_with_replicates"], rep["tasks_all_agree"], rep["tasks_some_disagree"]) == (4, 1, 2, 2)
    flags = {(p["task_id"], p["replicate"]): [f["kind"] for f in p["flags"]] for p in data["pairs"]}
    assert flags == {("r1", 0): [], ("r1", 1): ["premature_pass", "premature_pass"], ("r2", 0): [], ("r3", 0): [],
                     ("r4", 0): ["critic_objected", "deciding_call_failed", "premature_pass"]}
    r4 = next(p for p in data["pairs"] if p["task_id"] == "r4")
    assert [f["text"] for f in r4["flags"]] == [
        "ReturnCodeCritic said retry on the deciding step: command failed with returncode=1",
        "the deciding call failed: bash `pytest -q` (exit code 1)",
        "premature pass: c_note failed in e2e, advisory in smoke"]
    r1 = next(p for p in data["pairs"] if (p["task_id"], p["replicate"]) == ("r1", 1))
    assert [f["text"] for f in r1["flags"]] == [
        "premature pass: c_cmd failed in e2e, armed in smoke but undecided when it stopped",
        "premature pass: c_note failed in e2e, advisory in smoke"]
    assert s["flags"] == {"premature_pass": 3, "critic_objected": 1, "deciding_call_failed": 1}
    assert s["flagged_pairs"] == 2
    # steps: smoke 2+2+1+4+3 = 12, e2e 6+8+5+4+9 = 32
    assert (s["steps"]["a"], s["steps"]["b"]) == (12, 32)
    assert s["steps"]["saved_pct"] == pytest.approx(62.5)
    assert s["steps"]["low"] < 62.5 < s["steps"]["high"]


@pytest.mark.parametrize("by,expected", [
    # (group, pairs, tasks, agree, total, steps a, steps b)
    ("meta:scenario", [("alpha", 3, 2, 2, 3, 5, 19), ("beta", 2, 2, 1, 2, 7, 13)]),
    ("tag", [("x", 3, 2, 2, 3, 5, 19), ("y", 2, 2, 2, 2, 5, 9), ("(no tag)", 1, 1, 0, 1, 3, 9)]),
    ("deciding_criterion", [("c_cmd", 2, 2, 1, 2, 4, 14), ("c_skill", 2, 1, 1, 2, 4, 14),
                            ("(did not stop early)", 1, 1, 1, 1, 4, 4)]),
    ("criterion_type", [("command_executed", 2, 2, 1, 2, 4, 14), ("skill_triggered", 2, 1, 1, 2, 4, 14),
                        ("(did not stop early)", 1, 1, 1, 1, 4, 4)]),
    ("stop_reason", [("early_stop", 4, 3, 2, 4, 8, 28), ("final", 1, 1, 1, 1, 4, 4)]),
])
def test_grouped_figures_by_hand(client, grp, by, expected):
    data = client.get("/api/compare", params={**BASE, "group": by}).json()
    got = [(g["group"], g["pairs"], g["tasks"], g["agreement"]["agree"], g["agreement"]["total"],
            g["steps"]["a"], g["steps"]["b"]) for g in data["grouped"]]
    assert got == expected
    for g in data["grouped"]:
        assert g["steps"]["saved_pct"] == pytest.approx(100 * (g["steps"]["b"] - g["steps"]["a"]) / g["steps"]["b"])


def test_a_bad_group_is_a_400_naming_the_choices(client, grp):
    r = client.get("/api/compare", params={**BASE, "group": "colour"})
    assert r.status_code == 400
    assert r.json()["error"] == ("group must be one of tag, deciding_criterion, criterion_type, stop_reason or "
                                 "meta:KEY (a metadata key), not 'colour'")


def test_markdown_for_a_pull_request(client, grp):
    r = client.get("/api/compare", params={**BASE, "format": "md"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/markdown")
    text = r.text
    headline = client.get("/api/compare", params=BASE).json()["headline"]
    assert f"**{md(headline)}**" in text
    assert "| **smoke pass** | 2 | 2 |" in text and "| **smoke fail** | 0 | 1 |" in text
    assert "exact McNemar p = 0.5" in text
    assert "| steps | 12 | 32 | 62% |" in text
    assert "Replicates: 4 tasks, 5 paired runs; 1 task with replicates. Flaky" in text
    assert "### Disagreeing or flagged pairs (2)" in text
    assert ("| r4 | 0 | disagree: pass \\(stopped early\\) | fail | ReturnCodeCritic said retry" not in text)
    row = next(line for line in text.splitlines() if line.startswith("| r4 |"))
    assert "disagree: pass (stopped early)" in row and "premature pass: c\\_note failed in e2e" in row
    assert "[side by side](http://127.0.0.1/pair?a=s-r4-0&b=e-r4-0)" in row


def test_markdown_escapes_trace_text():
    assert md("a|b <script>x</script> [link](http://x) *bold* `code`\nnext") == (
        "a\\|b \\<script\\>x\\</script\\> \\[link\\](http://x) \\*bold\\* \\`code\\` next")


def test_csv_of_the_pairs(client, grp, ingest, tmp_path):
    r = client.get("/api/compare", params={**BASE, "format": "csv"})
    assert r.headers["content-type"].startswith("text/csv") and "attachment" in r.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [(x["task_id"], x["replicate"], x["agree"]) for x in rows] == [
        ("r1", "0", "yes"), ("r1", "1", "no"), ("r2", "0", "yes"), ("r3", "0", "yes"), ("r4", "0", "no")]
    r4 = rows[-1]
    assert r4["flags"] == "critic objected; deciding call failed; premature pass"
    assert (r4["a_steps"], r4["b_steps"], r4["a_verdict"], r4["b_verdict"]) == ("3", "9", "pass", "fail")
    # a cell a spreadsheet would run as a formula is defused
    ingest(write_jsonl(tmp_path / "f.jsonl", run("s-f", "=cmd()", "smoke", 0, verdict="pass", steps=1, scenario="z", tags=[])
                       + run("e-f", "=cmd()", "e2e", 0, verdict="pass", steps=1, scenario="z", tags=[])))
    rows = list(csv.DictReader(io.StringIO(client.get("/api/compare", params={**BASE, "format": "csv"}).text)))
    assert rows[0]["task_id"] == "'=cmd()"


def test_csv_of_variants_named_outside_latin_1_saves_under_their_name(client, ingest, tmp_path):
    # Header values travel as latin-1: "α" in a variant's name once made the export a 500.
    a, b = "v3 α+β #1?%", "e2e/运行"
    ingest(write_jsonl(tmp_path / "u.jsonl", run("s-u", "t", a, 0, verdict="pass", steps=1, scenario="z", tags=[])
                       + run("e-u", "t", b, 0, verdict="fail", steps=2, scenario="z", tags=[])))
    r = client.get("/api/compare", params={"experiment": "grp", "a": a, "b": b, "format": "csv"})
    assert r.status_code == 200
    assert r.headers["content-disposition"] == (
        "attachment; filename=\"compare-grp-v3______1__-e2e___.csv\"; "
        "filename*=UTF-8''compare-grp-v3%20%CE%B1%2B%CE%B2%20%231%3F%25-e2e%2F%E8%BF%90%E8%A1%8C.csv")
    (row,) = csv.DictReader(io.StringIO(r.text))
    assert (row["task_id"], row["a_verdict"], row["b_verdict"]) == ("t", "pass", "fail")


def test_cli_compare_prints_the_same_markdown_and_json(client, grp, settings):
    from click.testing import CliRunner

    from qita_board.cli import main

    api_md = client.get("/api/compare", params={**BASE, "format": "md"}).text
    result = CliRunner().invoke(main, ["compare", "--db", settings.db_url, "--experiment", "grp", "--a", "smoke",
                                       "--b", "e2e", "--md", "--base-url", "http://127.0.0.1"])
    assert result.exit_code == 0, result.output
    assert result.output == api_md + "\n"
    result = CliRunner().invoke(main, ["compare", "--db", settings.db_url, "--experiment", "grp", "--a", "smoke",
                                       "--b", "e2e", "--json"])
    import json

    assert json.loads(result.output)["summary"]["confusion"] == {"pass_pass": 2, "pass_fail": 2, "fail_pass": 0,
                                                                  "fail_fail": 1}
    plain = CliRunner().invoke(main, ["compare", "--db", settings.db_url, "--experiment", "grp", "--a", "smoke", "--b", "e2e"])
    assert plain.output.splitlines()[0] == client.get("/api/compare", params=BASE).json()["headline"]
    assert "  steps: 62% saved (95% CI" in plain.output
    missing = CliRunner().invoke(main, ["compare", "--db", settings.db_url, "--experiment", "nope", "--a", "smoke", "--b", "e2e"])
    assert missing.exit_code == 2


def test_pair_view_explains_the_stop(client, grp):
    data = client.get("/api/pair", params={"a": "s-r4-0", "b": "e-r4-0"}).json()
    assert data["deciding"]["step"] == 2 and data["deciding"]["criterion"] == "c_cmd"
    assert data["deciding"]["call"]["summary"] == "pytest -q" and data["deciding"]["call"]["exit_code"] == 1
    assert [f["kind"] for f in data["flags"]] == ["critic_objected", "deciding_call_failed", "premature_pass"]
    row = next(r for r in data["steps"] if r["step"] == 2)
    assert [(c["critic"], c["action"], c["reason"]) for c in row["a"]["critics"]] == [
        ("ReturnCodeCritic", "retry", "command failed with returncode=1"), ("Progress", "continue", "fine")]
    page = client.get("/pair", params={"a": "s-r4-0", "b": "e-r4-0"}).text
    assert 'href="/runs/s-r4-0?from=2#step-2"' in page
    assert "decided here: c_cmd" in page


def test_the_table_pages_while_the_figures_count_every_pair(client, grp):
    page = client.get("/compare", params={**BASE, "limit": 2}).text
    assert "rows 1–2 of 5" in page and page.count('class="pair-row') == 2
    assert "next 2 ›" in page
    second = client.get("/compare", params={**BASE, "limit": 2, "offset": 2}, headers={"HX-Request": "true"}).text
    assert "<html" not in second and "rows 3–4 of 5" in second and "‹ previous 2" in second
    api = client.get("/api/compare", params=BASE).json()
    assert len(api["pairs"]) == api["pairs_total"] == 5 and api["summary"]["paired"] == 5


def test_comparisons_are_warmed_before_the_first_visitor(settings, grp, monkeypatch):
    from fastapi.testclient import TestClient
    from sqlmodel import Session

    from qita_board.main import create_app
    from qita_board.queries import comparison

    app = create_app(settings)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        with Session(app.state.engine) as session:
            assert app.state.warmer.warm(session) == 1  # grp: smoke against e2e

        def no_more(*a, **k):
            raise AssertionError("computed again: the warmed comparison was not used")

        monkeypatch.setattr(comparison, "_comparison", no_more)
        body = c.get("/api/compare", params=BASE).json()
        assert body["summary"]["paired"] == 5 and body["summary"]["agreement"]["agree"] == 3


def test_a_restarted_board_reads_the_comparison_from_disk(settings, grp, monkeypatch):
    """On a SQLite file the warmed comparison is kept beside the database; a new board on the
    unchanged data reads it instead of computing it again (and recomputes when data change)."""
    from fastapi.testclient import TestClient

    from qita_board import diskcache
    from qita_board.main import create_app
    from qita_board.queries import cache, comparison

    if not settings.db_url.startswith("sqlite"):
        pytest.skip("the disk cache is for SQLite files")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        first = c.get("/api/compare", params={**BASE, "group": "tag"}).json()
    folder = diskcache.folder_for(create_app(settings).state.engine)
    # the comparison, what only grouping needs, and the grouping by tag
    assert folder and len([f for f in __import__("os").listdir(folder) if f.endswith(".json")]) == 3
    cache.clear()  # a new process: nothing in memory

    def no_more(*a, **k):
        raise AssertionError("computed again: the comparison on disk was not used")

    monkeypatch.setattr(comparison, "_comparison", no_more)
    monkeypatch.setattr(comparison, "_grouped", no_more)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        again = c.get("/api/compare", params={**BASE, "group": "tag"}).json()
    assert again["summary"] == first["summary"] and again["grouped"] == first["grouped"]
    assert again["pairs"] == first["pairs"]


def test_markdown_links_open_the_run_they_name_whatever_its_id(client, ingest, tmp_path):
    # ".." and "." as a path segment are resolved away by every browser, and "~~Li4" is how
    # the board writes ".." in a URL: the links must be the board's own encoding of each id
    # (app.urls), which a disagreeing pair lists with links to both of its runs.
    ids = {"..": ".", "~~Li4": "x y/z"}
    recs = []
    for a, b in ids.items():
        recs += run(a, f"task-{a}", "smoke", 0, verdict="pass", steps=1, scenario="z", tags=[])
        recs += run(b, f"task-{a}", "e2e", 0, verdict="fail", steps=2, scenario="z", tags=[])
    ingest(write_jsonl(tmp_path / "ids.jsonl", recs))
    text = client.get("/api/compare", params={"experiment": "grp", "a": "smoke", "b": "e2e", "format": "md"}).text
    links = re.findall(r"\]\(http://127\.0\.0\.1(/runs/[^)]*)\)", text)
    assert links == ["/runs/~~Li4", "/runs/~~Lg", "/runs/~~fn5MaTQ", "/runs/x%20y%2Fz"]
    assert [client.get("/api" + link).json()["run"]["run_id"] for link in links] == ["..", ".", "~~Li4", "x y/z"]
