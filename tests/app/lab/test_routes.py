"""The lab page and its JSON twin: the set, the policy from the URL, refusals with their
reason, the indexing notice, the frontier, the export, and trace text kept inert."""

from __future__ import annotations

import pytest

from qita.demo import EXPERIMENT, run_demo
from qita.live import live_capabilities
from qita_board.settings import Settings
from tests.app.lab.test_validate import wait_indexed
from tests.app.parsed_html import attrs, one, page, select_texts, texts_of_class
from tests.conftest import write_jsonl

DEMO = f"experiment={EXPERIMENT}&variant=e2e"


@pytest.fixture
def demo(tmp_path, ingest, client):
    assert ingest(*run_demo(tmp_path / "demo", tasks=24)).ok
    wait_indexed(client, DEMO)
    return client


def test_the_default_set_is_the_full_variant_and_the_policy_what_the_runs_declare(demo):
    data = demo.get("/api/lab").json()
    assert data["set"]["filters"] == {"experiment": EXPERIMENT, "variant": "e2e"} and data["set"]["defaulted"]
    assert data["set"]["simulated"] == 29 and data["policy"]["declared"]
    # as declared = as smoke ran: the pairs where the key criterion was not the whole story flip
    s = data["summary"]
    assert s["confusion"]["pass_fail"] == s["false_passes"]["count"] == 2
    assert data["headline"].startswith("Verdicts identical on 27 of 29")
    assert data["frontier"] is None and data["calibration"]["by_criterion"]
    frontier = demo.get(data["frontier_url"]).json()["frontier"]
    assert frontier["recommended"]["false_passes"]["count"] == 0


def test_three_policies_from_the_url_each_with_its_savings_and_flips(demo):
    """The issue's "done when": three armings of the e2e variant, each read for its saving
    and the verdicts it flips, with intervals."""
    seen = {}
    for arm in (["skill:decided"], ["ran_tests:pass"], ["no_push:fail", "skill:fail"]):
        query = "&".join(f"arm={a}" for a in arm)
        data = demo.get(f"/api/lab?{DEMO}&{query}").json()
        s = data["summary"]
        assert [a["criterion"] + ":" + a["stop_when"] for a in data["policy"]["arm"]] == arm
        assert s["tokens"]["saved_pct"] > 0 and s["tokens"]["low"] is not None
        assert s["false_passes"]["upper"] is not None and s["agreement"]["low"] is not None
        # every cut run stops where its armed criterion decided (or later), never before
        for p in data["pairs"]:
            if p["sim"]["cut"]:
                assert p["sim"]["stop_reason"] == "early_stop" and p["sim"]["deciding_criterion"] in \
                    {a.split(":")[0] for a in arm}
        seen[tuple(arm)] = s["false_passes"]["count"]
    # only arming the test run on pass passes runs whose final answer was wrong
    assert seen == {("skill:decided",): 0, ("ran_tests:pass",): 2, ("no_push:fail", "skill:fail"): 0}


def test_an_arming_that_cannot_fire_is_refused_with_its_reason(demo):
    spec = {"id": "says_fixed", "type": "final_answer_contains", "text": "fixed"}
    reason = live_capabilities([spec])["says_fixed"].arming_refusal("pass")
    api = demo.get(f"/api/lab?{DEMO}&arm=says_fixed:pass")
    assert api.status_code == 400 and api.json()["error"] == reason
    refused_page = demo.get(f"/lab?{DEMO}&arm=says_fixed:pass")
    assert refused_page.status_code == 400 and texts_of_class(refused_page.text, "error-message") == [reason]
    wrong_way = demo.get(f"/api/lab?{DEMO}&arm=no_push:pass")
    assert wrong_way.status_code == 400 and "can decide only ['fail']" in wrong_way.json()["error"]
    assert demo.get(f"/api/lab?{DEMO}&arm=nope:pass").status_code == 400
    assert demo.get(f"/api/lab?{DEMO}&arm=skill:maybe").status_code == 400
    # the page offers only what can fire: refused options are disabled, with the reason
    doc = page(demo.get(f"/lab?{DEMO}").text)
    refused = one(doc, 'select[name="arm"] option[value="no_push:pass"]')
    assert refused.has_attr("disabled") and refused["title"]
    assert not one(doc, 'select[name="arm"] option[value="no_push:fail"]').has_attr("disabled")
    assert "cannot be armed" in select_texts(doc, "tr.not-armable-row .not-armable")


def test_the_page_says_when_runs_are_still_being_indexed(tmp_path, ingest):
    from fastapi.testclient import TestClient

    from qita_board.main import create_app

    settings = Settings(db=str(tmp_path / "idx.db"), lab_index=False)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        from qita_board.db import open_database
        from qita_board.ingest import Ingestor

        engine = open_database(settings)
        assert Ingestor(engine, settings).ingest_paths([str(f) for f in run_demo(tmp_path / "d", tasks=4)]).ok
        engine.dispose()
        page = client.get(f"/lab?{DEMO}")
        # the e2e and smoke runs of the experiment: 5 of each (the fifth task has two replicates)
        assert texts_of_class(page.text, "indexing")[0].startswith("indexing 10 runs…")
        assert one(page.text, "#indexing")["hx-trigger"] == "every 3s"
        data = wait_indexed(client, DEMO)     # asking was enough: the indexer took the set
        assert data["indexing"] == {"pending": 0, "ready": True} and data["set"]["simulated"] == 5
        assert "indexing" not in texts_of_class(client.get(f"/lab?{DEMO}").text, "indexing")


def test_the_page_and_its_fragments(demo):
    html = demo.get(f"/lab?{DEMO}&arm=skill:decided").text
    assert texts_of_class(html, "headline")[0].startswith("simulated Verdicts identical on 29 of 29")
    assert select_texts(one(html, "section#validation"), ".validation-summary b") == ["29 of 29"]
    assert one(html, "#frontier")["hx-get"].startswith("/lab/frontier?")
    table = page(demo.get(f"/lab?{DEMO}&arm=skill:decided&sort=savings",
                          headers={"HX-Request": "true", "HX-Target": "lab-pairs"}).text)
    # the table alone in the box it scrolls in, no page around it
    assert [el.name for el in table.find_all(True, recursive=False)] == ["div"]
    assert table.div["class"] == ["table-scroll"] and "lab-pairs" in table.div.table["class"]
    frontier = page(demo.get(f"/lab/frontier?{DEMO}", headers={"HX-Request": "true"}).text)
    assert frontier.find("html") is None and len(one(frontier, "svg.frontier-chart").select("circle.dot-recommended")) == 1
    assert page(demo.get(f"/lab/frontier?{DEMO}").text).find("html") is not None
    data = demo.get(f"/api/lab/frontier?{DEMO}&measure=steps").json()
    assert data["frontier"]["measure"] == "steps" and len(data["frontier"]["points"]) > 10
    md = demo.get(f"/api/lab?{DEMO}&arm=ran_tests:pass&format=md").text
    assert md.startswith("### Policy lab (simulated): ran\\_tests:pass") and "false passes" in md


def test_reachable_from_compare_and_from_the_runs_list(demo):
    compare = demo.get(f"/compare?experiment={EXPERIMENT}&a=smoke&b=e2e").text
    assert attrs(compare, "p.lab-link > a", "href") == [f"/lab?experiment={EXPERIMENT}&variant=e2e"]
    runs = demo.get(f"/?experiment={EXPERIMENT}&variant=e2e").text
    assert attrs(runs, "p.lab-link > a", "href") == [f"/lab?experiment={EXPERIMENT}&variant=e2e"]


def test_trace_text_stays_inert_on_the_page_and_the_frontier(tmp_path, ingest, client):
    evil = '<script>alert("x")</script>'
    records = []
    for i, verdict in enumerate(("pass", "fail")):
        rid = f"run-{i}"
        records += [{"type": "run_start", "run_id": rid, "task_id": f"{evil}{i}", "experiment": "evil", "variant": "e2e",
                     "criteria": [{"id": evil, "type": "command_executed", "pattern": "pytest"}]},
                    {"type": "step", "run_id": rid, "step": 0, "actions": [{"name": "bash", "args": {"command": "pytest"}}]},
                    {"type": "step", "run_id": rid, "step": 1, "actions": []},
                    {"type": "run_end", "run_id": rid, "status": "completed", "verdict": verdict}]
    assert ingest(write_jsonl(tmp_path / "e.jsonl", records)).ok
    wait_indexed(client, "experiment=evil&variant=e2e")
    from urllib.parse import quote

    for path in (f"/lab?experiment=evil&variant=e2e&arm={quote(evil)}:pass", "/lab/frontier?experiment=evil&variant=e2e"):
        html = client.get(path).text
        # inert means escaped in the bytes: a substring check is the right one here
        assert "<script>alert" not in html and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html


def test_a_duplicate_run_is_set_aside_as_compare_sets_it_aside(tmp_path, ingest, client):
    # two e2e runs of t0 #0: compare keeps the later one; the lab simulates only that one
    records = []
    for rid, task, ts in (("old", "t0", "2026-01-01T10:00:00Z"), ("new", "t0", "2026-01-02T10:00:00Z"),
                          ("other", "t1", "2026-01-01T10:00:00Z")):
        records += [{"type": "run_start", "run_id": rid, "task_id": task, "experiment": "dup", "variant": "e2e", "ts": ts,
                     "criteria": [{"id": "tests", "type": "command_executed", "pattern": "pytest"}]},
                    {"type": "step", "run_id": rid, "step": 0, "actions": [{"name": "bash", "args": {"command": "pytest"}}]},
                    {"type": "step", "run_id": rid, "step": 1, "actions": []},
                    {"type": "run_end", "run_id": rid, "status": "completed", "verdict": "pass"}]
    assert ingest(write_jsonl(tmp_path / "d.jsonl", records)).ok
    data = wait_indexed(client, "experiment=dup&variant=e2e&arm=tests:pass")
    assert sorted(p["run_id"] for p in data["pairs"]) == ["new", "other"]
    assert [(d["run_id"], d["kept_run_id"]) for d in data["set"]["duplicates"]] == [("old", "new")]
    assert data["set"]["simulated"] == 2


def test_a_set_naming_an_experiment_variant_or_tag_that_does_not_exist_is_a_404_naming_the_valid_ones(demo):
    r = demo.get("/api/lab?experiment=nope")
    assert r.status_code == 404 and r.json()["error"] == f"no experiment 'nope'; experiments: {EXPERIMENT}"
    r = demo.get(f"/api/lab?experiment={EXPERIMENT}&variant=nope")
    assert r.status_code == 404 and r.json()["valid"] == ["e2e", "smoke"]
    html = demo.get(f"/lab?experiment={EXPERIMENT}&variant=nope")
    assert html.status_code == 404 and select_texts(html.text, "#valid-variants a.tag") == ["e2e", "smoke"]
    assert demo.get("/api/lab?tag=nope").status_code == 404
    # a set that is empty only because of its other filters is just empty
    r = demo.get(f"/api/lab?experiment={EXPERIMENT}&variant=e2e&q=nothing-matches-this")
    assert r.status_code == 200 and r.json()["set"]["simulated"] == 0


def test_the_runs_lists_link_for_runs_without_an_experiment_opens_their_set(demo, ingest, tmp_path):
    # "(none)" is the runs list's filter for the runs without an experiment (or variant); the
    # list's lab link carries it, and the lab answered it with "no experiment '(none)'"
    ingest(write_jsonl(tmp_path / "loose.jsonl", [
        {"type": "run_start", "run_id": f"loose-{i}", "ts": "2026-01-01T00:00:00Z"} for i in range(3)]))
    runs = demo.get("/?experiment=(none)").text
    (link,) = attrs(runs, "p.lab-link > a", "href")
    assert link == "/lab?experiment=%28none%29"
    r = demo.get("/api" + link)
    assert r.status_code == 200 and r.json()["set"]["filters"] == {"experiment": "(none)"}
    listed = demo.get("/api/runs", params={"experiment": "(none)"}).json()["count"]
    assert listed == 3 == r.json()["set"]["runs"]
    assert demo.get(f"/api/lab?experiment={EXPERIMENT}&variant=(none)").status_code == 200


def test_an_informational_criterion_cannot_be_armed(tmp_path, ingest, client):
    records = []
    for i, verdict in enumerate(("pass", "fail")):
        rid = f"run-{i}"
        records += [{"type": "run_start", "run_id": rid, "task_id": f"t{i}", "experiment": "info", "variant": "e2e",
                     "criteria": [{"id": "tests", "type": "command_executed", "pattern": "pytest"},
                                  {"id": "listed", "type": "command_executed", "pattern": "^ls", "gating": False}]},
                    {"type": "step", "run_id": rid, "step": 0, "actions": [{"name": "bash", "args": {"command": "ls"}}]},
                    {"type": "step", "run_id": rid, "step": 1, "actions": [{"name": "bash", "args": {"command": "pytest"}}]},
                    {"type": "run_end", "run_id": rid, "status": "completed", "verdict": verdict}]
    assert ingest(write_jsonl(tmp_path / "i.jsonl", records)).ok
    wait_indexed(client, "experiment=info&variant=e2e")
    r = client.get("/api/lab?experiment=info&variant=e2e&arm=listed:pass")
    assert r.status_code == 400
    assert r.json()["error"] == ("criterion 'listed' is informational (gating: false): it never gates a verdict, so it "
                                 "cannot be armed (an early-stopped run is gated on its armed criteria)")
    assert client.get("/api/lab?experiment=info&variant=e2e&arm=tests:pass").status_code == 200
    doc = page(client.get("/lab?experiment=info&variant=e2e").text)
    assert one(doc, 'select[name="arm"] option[value="listed:pass"]').has_attr("disabled")
    labels = [p["label"] for p in client.get("/api/lab/frontier?experiment=info&variant=e2e").json()["frontier"]["points"]]
    assert labels and not any("listed" in label for label in labels)


def test_the_forms_empty_numbers_mean_none_and_bad_ones_are_refused(demo):
    form = f"/api/lab?{DEMO}&policy=1&arm=skill:decided&arm=&min_steps=&max_steps=&max_tokens=&max_seconds=&rule=auto"
    data = demo.get(form).json()
    assert data["policy"]["min_steps"] is None and data["policy"]["max_tokens"] is None
    assert [a["criterion"] for a in data["policy"]["arm"]] == ["skill"]
    for bad in ("min_steps=1.5", "max_steps=0", "max_tokens=lots", "max_seconds=0", "max_seconds=inf"):
        r = demo.get(f"/api/lab?{DEMO}&arm=skill:decided&{bad}")
        assert r.status_code == 400, bad
    # nothing armed, by the form: every run as recorded
    nothing = demo.get(f"/api/lab?{DEMO}&policy=1").json()
    assert nothing["policy"]["label"] == "nothing armed" and nothing["summary"]["cut"] == 0
    assert nothing["summary"]["verdict_agreement"] == {"agree": 29, "total": 29}
    assert demo.get(f"/api/lab?{DEMO}&max_seconds=0.5").json()["policy"]["max_seconds"] == 0.5


def test_a_page_of_pairs_past_the_end_goes_to_the_last_page(demo):
    # 29 simulated pairs in pages of 10 start at 0, 10 and 20. An old link to offset 100000
    # said "No paired tasks" under the figures for all 29.
    assert demo.get(f"/api/lab?{DEMO}").json()["pairs_total"] == 29
    moved = demo.get(f"/lab?{DEMO}&arm=skill:decided&limit=10&offset=100000", follow_redirects=False)
    assert (moved.status_code, moved.headers["location"]) == (
        303, f"/lab?{DEMO}&arm=skill%3Adecided&limit=10&offset=20")
    api = demo.get(f"/api/lab?{DEMO}&limit=10&offset=29")
    assert api.status_code == 404
    assert api.json()["error"] == "offset 29 is past the end: 29 paired tasks (the last page starts at offset 20)"
    last = demo.get(f"/api/lab?{DEMO}&limit=10&offset=20").json()
    assert len(last["pairs"]) == 9 and last["pairs_offset"] == 20


def _three_variants(tmp_path, ingest, *, full: tuple[str, ...] = ("mid", "e2e")):
    # t0 and t1 run as smoke (early stop on), and as each of `full` (early stop off)
    records = []
    for variant in ("smoke", *full):
        for task in ("t0", "t1"):
            rid = f"{variant}-{task}"
            early = variant == "smoke"
            records += [{"type": "run_start", "run_id": rid, "task_id": task, "experiment": "three", "variant": variant,
                         "criteria": [{"id": "tests", "type": "command_executed", "pattern": "pytest", "armed": early}],
                         "early_stop": {"enabled": early}},
                        {"type": "step", "run_id": rid, "step": 0, "actions": [{"name": "bash", "args": {"command": "pytest"}}]},
                        {"type": "step", "run_id": rid, "step": 1, "actions": []},
                        {"type": "run_end", "run_id": rid, "status": "completed",
                         "verdict": "pass" if variant != "mid" else "fail"}]
    assert ingest(write_jsonl(tmp_path / "three.jsonl", records)).ok


def test_an_experiment_named_without_a_variant_simulates_its_full_variant_alone(tmp_path, ingest, client):
    # /lab?experiment=three simulated mid's and e2e's runs together: each task's mid run was
    # "a duplicate" of its e2e run, set aside, and the verdicts were e2e's under mid's name
    _three_variants(tmp_path, ingest)
    data = wait_indexed(client, "experiment=three")
    assert data["set"]["filters"] == {"experiment": "three", "variant": "e2e"}
    assert data["set"]["variants"] == ["e2e", "mid", "smoke"] and data["set"]["duplicates"] == []
    assert sorted(p["run_id"] for p in data["pairs"]) == ["e2e-t0", "e2e-t1"]
    html = page(client.get("/lab?experiment=three").text)
    assert one(html, ".lab-variant-note").get_text() == (
        "(the experiment has 3 variants, e2e, mid, smoke: the lab simulates one at a time)")
    assert one(html, "details.lab-chooser").has_attr("open")
    # a variant named is simulated as named, with no note
    named = client.get("/api/lab?experiment=three&variant=mid").json()
    assert sorted(p["run_id"] for p in named["pairs"]) == ["mid-t0", "mid-t1"] and named["set"]["variants"] == []


def test_without_an_e2e_variant_the_first_full_one_by_name_is_simulated(tmp_path, ingest, client):
    _three_variants(tmp_path, ingest, full=("long", "base"))
    data = wait_indexed(client, "experiment=three")
    assert data["set"]["filters"]["variant"] == "base"      # not smoke: it stopped early
