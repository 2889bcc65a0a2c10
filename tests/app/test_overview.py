"""The experiments overview (/ and /api/experiments) against a crafted store whose figures
are worked out by hand below, and the Wilson interval against published values."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from qita_board import overview
from qita_board.overview import median, pass_rate, wilson
from tests.app.pages_traces import run_records
from tests.app.parsed_html import one, page, select_texts
from tests.app.parsed_html import text as shown
from tests.conftest import write_jsonl

pytestmark = pytest.mark.both_backends


def test_wilson_interval_matches_published_values():
    # 95% Wilson score intervals as tabulated (Newcombe 1998; Brown, Cai & DasGupta 2001)
    lo, hi = wilson(8, 10)
    assert (round(lo, 3), round(hi, 3)) == (0.490, 0.943)
    lo, hi = wilson(2, 3)
    assert (round(lo, 3), round(hi, 3)) == (0.208, 0.939)
    lo, hi = wilson(0, 1)
    assert (lo, round(hi, 3)) == (0.0, 0.793)
    lo, hi = wilson(1, 1)
    assert (round(lo, 3), hi) == (0.207, 1.0)
    assert wilson(0, 0) is None
    assert pass_rate(2, 1, 1) == 0.5 and pass_rate(0, 0, 0) is None
    assert median([3.0, 1.0, 2.0]) == 2.0 and median([4.0, 1.0, 3.0, 2.0]) == 2.5 and median([]) is None


def _run(run_id, *, experiment, variant, task, passed, cost=None, second=0, extra_criterion=False):
    """A finished run graded on criterion `ok` (and `style`), with its cost on run_end."""
    criteria = [{"id": "ok"}] + ([{"id": "style"}] if extra_criterion else [])
    results = [] if passed is None else [{"id": "ok", "score": 1.0 if passed else 0.0, "passed": passed}]
    if extra_criterion:
        results.append({"id": "style", "score": 0.0, "passed": False})
    recs = run_records(run_id, steps=2, experiment=experiment, variant=variant, criteria=criteria, results=results,
                       second=second, stop_reason="final", stop_detail="final_result is set")
    recs[0]["task_id"] = task
    if cost is not None:
        recs[-1]["cost_usd"] = cost
    return recs


@pytest.fixture
def crafted(tmp_path, ingest, engine):
    recs = []
    # alpha / smoke: t1 pass $0.10, t2 fail $0.30, t3 pass $0.20, t4 errored before grading (set below), no cost
    recs += _run("a-s-1", experiment="alpha", variant="smoke", task="t1", passed=True, cost=0.10, second=1)
    recs += _run("a-s-2", experiment="alpha", variant="smoke", task="t2", passed=False, cost=0.30, second=2)
    recs += _run("a-s-3", experiment="alpha", variant="smoke", task="t3", passed=True, cost=0.20, second=3)
    recs += _run("a-s-4", experiment="alpha", variant="smoke", task="t4", passed=None, second=4)
    # alpha / e2e: t1 pass $1.00, t2 fail $3.00 (fails two criteria), t3 fail $2.00, t4 fail $4.00
    recs += _run("a-e-1", experiment="alpha", variant="e2e", task="t1", passed=True, cost=1.0, second=5)
    recs += _run("a-e-2", experiment="alpha", variant="e2e", task="t2", passed=False, cost=3.0, second=6,
                 extra_criterion=True)
    recs += _run("a-e-3", experiment="alpha", variant="e2e", task="t3", passed=False, cost=2.0, second=7)
    recs += _run("a-e-4", experiment="alpha", variant="e2e", task="t4", passed=False, cost=4.0, second=8)
    # beta / only: one pass, one not graded (no criteria), one that never ended
    recs += _run("b-1", experiment="beta", variant="only", task="u1", passed=True, cost=0.5, second=20)
    recs += run_records("b-2", experiment="beta", variant="only", second=21)
    recs += run_records("b-3", experiment="beta", variant="only", second=22, end=False)
    assert ingest(write_jsonl(tmp_path / "crafted.jsonl", recs)).ok
    # An errored run (the verdict coder_eval gives a task that errored): counted apart from fail.
    with engine.begin() as conn:
        conn.execute(text("UPDATE runs SET verdict = 'error', stop_detail = 'agent crashed' WHERE run_id = 'a-s-4'"))


def _by_name(body):
    return {e["experiment"]: {v["variant"]: v for v in e["variants"]} | {"_": e} for e in body["experiments"]}


def test_overview_figures_worked_by_hand(crafted, client):
    body = client.get("/api/experiments").json()
    assert body["runs"] == 11
    exps = _by_name(body)
    assert list(exps) == ["beta", "alpha"]                       # latest activity first (beta's runs start later)

    smoke = exps["alpha"]["smoke"]
    assert (smoke["runs"], smoke["passed"], smoke["failed"], smoke["errored"]) == (4, 2, 1, 1)
    assert smoke["pass_rate"] == pytest.approx(2 / 4)            # pass / (pass + fail + error)
    # Wilson 95% for 2 of 4: centre (0.5 + 1.92/4) / (1 + 3.84/4); worked: [0.150, 0.850]
    assert [round(x, 3) for x in smoke["interval"]] == [0.150, 0.850]
    assert smoke["median_cost_usd"] == pytest.approx(0.20)      # 0.10 0.20 0.30 (the errored run has none)
    assert (smoke["cost_runs"], smoke["cost_missing"]) == (3, 1)
    assert smoke["failing"] == 2
    assert {(r["reason"], r["count"]) for r in smoke["failure_reasons"]} == {
        ("criterion ok failed", 1), ("agent crashed", 1)}       # the errored run: no failing criterion, its detail

    e2e = exps["alpha"]["e2e"]
    assert (e2e["runs"], e2e["passed"], e2e["failed"], e2e["errored"]) == (4, 1, 3, 0)
    assert e2e["pass_rate"] == pytest.approx(0.25)
    assert [round(x, 3) for x in e2e["interval"]] == [0.046, 0.699]   # Wilson 95% for 1 of 4
    assert e2e["median_cost_usd"] == pytest.approx(2.5)          # 1 2 | 3 4: mean of the middle two
    # three failing runs fail "ok"; one of them fails "style" too; "final_result is set" is no reason
    assert [(r["reason"], r["count"]) for r in e2e["failure_reasons"]] == [
        ("criterion ok failed", 3), ("criterion style failed", 1)]

    beta = exps["beta"]["only"]
    # b-3 never ended: no verdict yet (its old timestamps make it abandoned, not running)
    assert (beta["runs"], beta["passed"], beta["not_graded"], beta["no_verdict"], beta["running"]) == (3, 1, 1, 1, 0)
    assert beta["pass_rate"] == 1.0 and [round(x, 3) for x in beta["interval"]] == [0.207, 1.0]
    assert beta["failure_reasons"] == []
    assert exps["beta"]["_"]["compare"] is None                 # one variant: nothing to compare


def test_overview_headline_is_the_compare_pages(crafted, client):
    alpha = _by_name(client.get("/api/experiments").json())["alpha"]["_"]
    c = alpha["compare"]
    assert (c["a"], c["b"]) == ("smoke", "e2e")
    assert c["url"] == "/compare?experiment=alpha&a=smoke&b=e2e"
    compared = client.get(c["url"] + "&format=json").json()
    assert c["headline"] == compared["headline"]
    # paired t1..t4: t1 pass/pass and t2 fail/fail agree, t3 pass/fail does not; t4 pairs the
    # error with a fail, both misses, so they agree (app.compare: an error counts as a miss)
    assert c["headline"].startswith("Verdicts identical on 3 of 4 paired runs (4 tasks): agreement 75%")
    box = one(client.get("/").text, 'section[aria-label="Experiment alpha"] .experiment-compare')
    assert select_texts(box, "p.headline-small") == [c["headline"]]
    link = one(box, "a.compare-link")
    assert (link["href"], shown(link)) == ("/compare?experiment=alpha&a=smoke&b=e2e", "Compare smoke with e2e →")


def test_overview_page_shows_each_variant_apart(crafted, client):
    html = client.get("/").text
    doc = page(html)
    alpha = one(doc, 'section[aria-label="Experiment alpha"]')

    def cells(variant):
        """A variant row's figures: pass rate, its interval, median cost, failure reasons."""
        row = one(alpha, f'tr.variant-row[data-variant="{variant}"]')
        rate = one(row, "td.pass-rate")
        cost = row.select("td")[3]                               # runs, pass · fail · error, pass rate, cost
        return shown(rate.b), shown(one(rate, ".interval")), shown(cost), select_texts(row, ".reason-text")

    rate, interval, cost, reasons = cells("smoke")
    assert (rate, interval) == ("50%", "(15%–85%)") and cost.startswith("$0.2000") and "agent crashed" in reasons
    rate, interval, cost, _ = cells("e2e")
    assert (rate, interval) == ("25%", "(5%–70%)") and cost.startswith("$2.50")
    # 3 of 8: the mixed figure appears nowhere, aria-labels included: a check on the bytes
    assert "38%" not in html
    assert one(doc, "a.all-runs")["href"] == "/runs"             # the runs list one click away


def test_list_links_to_the_old_home_redirect_to_the_runs_list(crafted, client):
    r = client.get("/?variant=e2e&sort=steps", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/runs?variant=e2e&sort=steps"
    assert client.get("/api/runs?variant=e2e").json()["count"] == 4


def test_empty_board_says_how_to_start(client):
    assert client.get("/api/experiments").json() == {"experiments": [], "runs": 0}
    empty = one(client.get("/").text, "p.empty")
    assert "qita demo" in select_texts(empty, "code") and "/upload" in [a["href"] for a in empty.select("a")]


def test_runs_without_an_experiment_or_variant_link_to_just_those_runs(tmp_path, ingest, client):
    from tests.app.pages_traces import run_records
    from tests.app.parsed_html import attrs
    from tests.conftest import write_jsonl

    recs = run_records("with", experiment="ab", variant="smoke") + run_records("loose", experiment=None, variant=None)
    assert ingest(write_jsonl(tmp_path / "n.jsonl", recs)).ok
    loose = next(e for e in client.get("/api/experiments").json()["experiments"] if e["experiment"] is None)
    assert loose["runs_url"] == "/runs?experiment=%28none%29"
    assert loose["variants"][0]["runs_url"] == "/runs?experiment=%28none%29&variant=%28none%29"
    for url in (loose["runs_url"], loose["variants"][0]["runs_url"]):
        assert [r["run_id"] for r in client.get("/api" + url).json()["data"]] == ["loose"]
    doc = page(client.get("/").text)
    assert "/runs?experiment=%28none%29" in attrs(doc, "h2 a", "href")
    # the runs list's per-variant figures link the same way
    links = attrs(page(client.get("/runs").text), "ul.variant-rates a", "href")
    assert any("experiment=%28none%29" in h and "variant=%28none%29" in h for h in links)


@pytest.mark.parametrize(("tasks", "expected"), [
    # (decided, passed, errored replicates) per task -> tasks, passed, failed, error, mixed, rate;
    # replicates fold to their worst verdict: error, then failure, then pass (coder_eval's fold)
    ([(2, 2, 0), (1, 0, 0), (1, 1, 0)], (3, 2, 1, 0, 0, 2 / 3)),
    ([(2, 1, 0), (1, 1, 0)], (2, 1, 1, 0, 1, 1 / 2)),      # pass and fail: a failure
    ([(0, 0, 0), (2, 0, 0)], (2, 0, 1, 0, 0, 0.0)),        # a task with nothing decided counts for none
    ([(3, 1, 2)], (1, 0, 0, 1, 1, 0.0)),                   # pass and errors: an error
    ([(3, 1, 1)], (1, 0, 0, 1, 1, 0.0)),                   # pass, fail, error: an error
    # an error is decided and not passed (coder_eval's 0.0), in its own category: 1 of 3
    ([(1, 1, 0), (1, 0, 1), (2, 0, 2)], (3, 1, 0, 2, 0, 1 / 3)),
    ([(2, 0, 1)], (1, 0, 0, 1, 1, 0.0)),                   # a failure and an error: an error
    ([(3, 3, 0), (2, 0, 0)], (2, 1, 1, 0, 0, 1 / 2)),      # replicates that agree are not mixed
])
def test_figures_by_task_count_each_task_once(tasks, expected):
    f = overview.task_figures(tasks)
    assert (f["tasks"], f["tasks_passed"], f["tasks_failed"], f["tasks_error"], f["tasks_mixed"],
            f["task_pass_rate"]) == expected


def test_figures_by_task_have_no_rate_when_the_variant_measured_nothing():
    # the tasks are still counted; only the rate, which would read 0 of 2, is withheld
    f = overview.task_figures([(1, 0, 0), (2, 0, 0)], measured=False)
    assert (f["tasks"], f["tasks_failed"], f["task_pass_rate"]) == (2, 2, None)


def test_variants_whose_finished_runs_are_not_graded_say_so_not_yet(tmp_path, ingest, client):
    # Runs that ended without criteria or a score (QitOS runs, say) will never have a pass,
    # fail or error: "yet" and "0 of 0 graded" read as if they were still to come.
    from tests.app.pages_traces import run_records
    from tests.conftest import write_jsonl

    recs = [r for i in range(2) for r in run_records(f"ng-{i}", experiment="plain", variant="v1")]
    recs += [r for i in range(2) for r in run_records(f"nv-{i}", experiment="plain", variant="v2")]
    recs += run_records("waiting", experiment="later", variant="v", end=False)
    assert ingest(write_jsonl(tmp_path / "ng.jsonl", recs)).ok
    doc = page(client.get("/").text)
    plain = one(doc, 'section[aria-label="Experiment plain"]')
    assert shown(one(one(plain, 'tr.variant-row[data-variant="v1"]'), "td.pass-rate")) == \
        "— not graded: none of its runs has a pass, fail or error"
    later = one(doc, 'section[aria-label="Experiment later"]')
    assert shown(one(later, "td.pass-rate")) == "— no pass, fail or error yet"
    runs = page(client.get("/runs?experiment=plain").text)
    assert [shown(x) for x in runs.select("ul.variant-rates li .not-graded")] == ["not graded", "not graded"]
    one_variant = page(client.get("/runs?experiment=plain&variant=v1").text)
    labels = [shown(x) for x in one_variant.select(".stat-label")]
    assert "pass rate (no run here is graded: none has a pass, fail or error)" in labels


@pytest.mark.parametrize("named", [5000, 1])   # the set-aside ids named, or the window query in each statement
def test_an_experiment_run_again_counts_the_latest_run_of_each_task_as_compare_pairs_it(tmp_path, ingest, client,
                                                                                          monkeypatch, named):
    from qita_board.queries import comparison

    monkeypatch.setattr(comparison, "SUPERSEDED_IDS_MAX", named)
    # Day 1: smoke t1 pass, t2 pass; e2e t1 pass, t2 fail. Day 2 (later start) runs e2e again:
    # t1 fail, t2 fail. Two attempts at the same (task, replicate), not replicates: compare
    # keeps day 2's e2e runs, and so does the overview: e2e 0 of 2 (not 1 of 4), with the two
    # day-1 runs counted apart; smoke is untouched.
    recs = []
    recs += _run("d1-s-1", experiment="again", variant="smoke", task="t1", passed=True, cost=0.1, second=1)
    recs += _run("d1-s-2", experiment="again", variant="smoke", task="t2", passed=True, cost=0.1, second=2)
    recs += _run("d1-e-1", experiment="again", variant="e2e", task="t1", passed=True, cost=1.0, second=3)
    recs += _run("d1-e-2", experiment="again", variant="e2e", task="t2", passed=False, cost=1.0, second=4)
    recs += _run("d2-e-1", experiment="again", variant="e2e", task="t1", passed=False, cost=3.0, second=30)
    recs += _run("d2-e-2", experiment="again", variant="e2e", task="t2", passed=False, cost=5.0, second=31)
    # the same task id in a run without an experiment is no attempt at a pair: kept
    recs += _run("loose-1", experiment=None, variant=None, task="t1", passed=True, second=40)
    recs += _run("loose-2", experiment=None, variant=None, task="t1", passed=True, second=41)
    assert ingest(write_jsonl(tmp_path / "again.jsonl", recs)).ok
    body = client.get("/api/experiments").json()
    assert body["runs"] == 8                                     # every stored run, as the runs list holds them
    exps = _by_name(body)
    e2e, smoke = exps["again"]["e2e"], exps["again"]["smoke"]
    assert (e2e["runs"], e2e["set_aside"], e2e["passed"], e2e["failed"], e2e["pass_rate"]) == (2, 2, 0, 2, 0.0)
    assert (e2e["tasks"], e2e["tasks_mixed"], e2e["median_cost_usd"], e2e["failing"]) == (2, 0, 4.0, 2)
    assert (smoke["runs"], smoke["set_aside"], smoke["pass_rate"]) == (2, 0, 1.0)
    assert (exps["again"]["_"]["runs"], exps["again"]["_"]["set_aside"]) == (4, 2)
    assert (exps[None][None]["runs"], exps[None][None]["set_aside"]) == (2, 0)
    compared = client.get("/compare", params={"experiment": "again", "a": "smoke", "b": "e2e", "format": "json"}).json()
    assert exps["again"]["_"]["compare"]["headline"] == compared["headline"]
    assert sorted(d["run_id"] for d in compared["duplicates"]["b"]) == ["d1-e-1", "d1-e-2"]
    row = one(page(client.get("/").text), 'section[aria-label="Experiment again"] tr.variant-row[data-variant="e2e"]')
    assert shown(one(row, ".set-aside")) == "and 2 older, set aside"
    assert shown(one(row, "td.pass-rate").b) == "0%"


def test_the_overview_keeps_the_run_compare_keeps_when_start_times_tie_or_are_missing(tmp_path, ingest, client):
    # compare.index_runs: a run with a start time beats one without; equal times go to the
    # later stored run. t1: a (no time, pass), b and c (same time; b fail, c pass) -> c.
    # t2: d (no time, pass), e (no time, fail) -> e. The overview must keep the same two.
    recs = []
    for rid, task, passed, second in (("a", "t1", True, None), ("b", "t1", False, 5), ("c", "t1", True, 5),
                                      ("d", "t2", True, None), ("e", "t2", False, None)):
        run = _run(rid, experiment="tie", variant="e2e", task=task, passed=passed, second=second or 0)
        if second is None:
            del run[0]["ts"]
        recs += run
    recs += _run("s1", experiment="tie", variant="smoke", task="t1", passed=True)
    recs += _run("s2", experiment="tie", variant="smoke", task="t2", passed=True)
    assert ingest(write_jsonl(tmp_path / "tie.jsonl", recs)).ok
    compared = client.get("/compare", params={"experiment": "tie", "a": "smoke", "b": "e2e", "format": "json"}).json()
    assert sorted(d["run_id"] for d in compared["duplicates"]["b"]) == ["a", "b", "d"]
    e2e = _by_name(client.get("/api/experiments").json())["tie"]["e2e"]
    assert (e2e["runs"], e2e["set_aside"], e2e["passed"], e2e["failed"]) == (2, 3, 1, 1)   # c pass, e fail
