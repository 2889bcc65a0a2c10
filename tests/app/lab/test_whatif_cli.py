"""`qita whatif`, run as a user would: it indexes what it needs, answers as the lab does,
refuses an arming that cannot fire with exit 2 and the reason."""

from __future__ import annotations

import orjson

from qita.demo import EXPERIMENT, run_demo
from qita.live import live_capabilities
from tests.app.test_cli import qita


def demo_db(tmp_path) -> str:
    """The demo with 8 tasks: 10 runs per variant (every fifth task has two replicates)."""
    db = str(tmp_path / "w.db")
    r = qita("ingest", *[str(f) for f in run_demo(tmp_path / "demo", tasks=8)], "--db", db)
    assert r.returncode == 0, r.stderr
    return db


def test_whatif_text_json_and_markdown(tmp_path):
    db = demo_db(tmp_path)
    r = qita("whatif", "--experiment", EXPERIMENT, "--variant", "e2e", "--arm", "skill:decided", "--db", db)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("Policy: skill:decided — simulated over 10 full runs")
    assert any(line.startswith("  false passes: 0 of 10") for line in lines)
    assert "Against the recorded smoke runs: 10 of 10 pairs match in stop step and verdict" in r.stdout
    data = orjson.loads(qita("whatif", "--experiment", EXPERIMENT, "--variant", "e2e", "--arm", "skill:decided",
                             "--min-steps", "2", "--json", "--db", db).stdout)
    assert data["policy"]["min_steps"] == 2 and data["set"]["simulated"] == 10
    # the same figures as the text: the steps of every cut run are at least 2
    assert all(p["sim"]["steps_taken"] >= 2 for p in data["pairs"] if p["sim"]["cut"])
    assert data["frontier"]["points"] and data["indexing"]["ready"]
    md = qita("whatif", "--experiment", EXPERIMENT, "--variant", "e2e", "--arm", "ran_tests:pass", "--md", "--db", db)
    assert md.returncode == 0 and md.stdout.startswith("### Policy lab (simulated): ran\\_tests:pass")


def test_whatif_refuses_what_cannot_fire_with_exit_2(tmp_path):
    db = demo_db(tmp_path)
    r = qita("whatif", "--experiment", EXPERIMENT, "--variant", "e2e", "--arm", "says_fixed:pass", "--db", db)
    reason = live_capabilities([{"id": "says_fixed", "type": "final_answer_contains", "text": "x"}])["says_fixed"] \
        .arming_refusal("pass")
    assert r.returncode == 2 and r.stderr.strip() == f"error: {reason}"
    nothing = qita("whatif", "--experiment", "no-such", "--variant", "e2e", "--db", db)
    assert nothing.returncode == 2 and nothing.stderr.strip() == f"error: no experiment 'no-such'; experiments: {EXPERIMENT}"


def test_whatif_help_ends_with_an_example():
    out = qita("whatif", "--help").stdout
    assert "Example:" in out and "qita whatif --experiment" in out
