"""The policy lab in real Chromium: from compare to the lab, three policies tried from the
form, the frontier chart drawn and its recommended policy tried, a refusal, hostile text."""

from __future__ import annotations

import time
from urllib.parse import quote

import httpx

from qita.demo import EXPERIMENT, run_demo
from tests.browser.test_hostile_pages_browser import DOM_PROBE
from tests.conftest import write_jsonl


def ready(base: str, query: str) -> dict:
    deadline = time.monotonic() + 60
    while True:
        data = httpx.get(f"{base}/api/lab?{query}", timeout=30).json()
        if data["indexing"]["ready"] or time.monotonic() > deadline:
            return data
        time.sleep(0.2)


def test_a_user_tries_three_policies_and_the_recommended_one(live_server, page, ingest, tmp_path):
    assert ingest(*run_demo(tmp_path / "demo", tasks=24)).ok
    base, query = live_server.url, f"experiment={EXPERIMENT}&variant=e2e"
    ready(base, query)
    page.goto(f"{base}/compare?experiment={EXPERIMENT}&a=smoke&b=e2e")
    page.get_by_role("link", name="Try other early-stop policies on e2e in the policy lab").click()
    page.wait_for_url(f"**/lab?{query}")
    # the simulation of smoke's own arming matches what smoke did, pair by pair
    assert page.locator(".validation-summary").inner_text().startswith("29 of 29 pairs match")

    seen = {}
    for arm, when in (("skill", "decided"), ("ran_tests", "pass"), ("no_push", "fail")):
        page.locator("select[name=arm]").evaluate_all("els => els.forEach(e => { e.value = '' })")
        page.get_by_label(f"arm {arm}", exact=True).select_option(f"{arm}:{when}")
        page.get_by_role("button", name="Simulate").click()
        page.wait_for_url(f"**arm={arm}%3A{when}**")
        want = httpx.get(f"{base}/api/lab?{query}&arm={arm}:{when}", timeout=30).json()["summary"]
        text = page.locator("#false-passes").inner_text()
        assert text.startswith(f"{want['false_passes']['count']} false pass")
        saved = page.locator("#savings tr.measure-tokens td.saved").inner_text()
        assert saved == f"{round(want['tokens']['saved_pct'])}%"
        seen[arm] = want["false_passes"]["count"]
    assert seen == {"skill": 0, "ran_tests": 2, "no_push": 0}

    # the frontier loads after the page: one dot per candidate that saves something measurable
    page.locator("svg.frontier-chart circle").first.wait_for()
    frontier = httpx.get(f"{base}/api/lab/frontier?{query}", timeout=30).json()["frontier"]
    assert page.locator("svg.frontier-chart circle").count() == len(frontier["chart"]["dots"])
    assert page.locator("svg.frontier-chart circle.dot-recommended").count() == 1
    best = frontier["recommended"]
    assert best["false_passes"]["count"] == 0
    assert page.locator("#recommended").inner_text().startswith(f"Recommended: {best['label']}")
    with page.expect_navigation():
        page.locator("#recommended").get_by_role("link", name="Try it").click()
    assert page.locator("#false-passes").inner_text().startswith("0 false passes")
    assert page.locator(".lab-policy h2").inner_text() == f"Policy {best['label']}"
    assert page.errors == []


def test_a_refused_arming_says_why(live_server, page, ingest, tmp_path):
    assert ingest(*run_demo(tmp_path / "demo", tasks=4)).ok
    ready(live_server.url, f"experiment={EXPERIMENT}&variant=e2e")
    page.goto(f"{live_server.url}/lab?experiment={EXPERIMENT}&variant=e2e&arm=says_fixed:pass")
    assert "cannot be decided mid-run, so it cannot be armed" in page.locator(".error-message").inner_text()
    page.goto(f"{live_server.url}/lab?experiment={EXPERIMENT}&variant=e2e")
    option = page.locator("select[name=arm] option[value='no_push:pass']")
    assert option.is_disabled() and "can decide only ['fail']" in option.get_attribute("title")


def test_the_lab_link_of_runs_without_an_experiment_opens_the_lab(live_server, page, ingest, tmp_path):
    assert ingest(write_jsonl(tmp_path / "loose.jsonl", [
        {"type": "run_start", "run_id": f"loose-{i}", "ts": "2026-01-01T00:00:00Z"} for i in range(2)])).ok
    page.goto(f"{live_server.url}/runs?experiment=(none)")
    page.locator("p.lab-link > a").click()
    page.wait_for_url("**/lab?experiment=%28none%29")
    assert page.locator("h1").inner_text().startswith("Policy lab")
    assert page.locator(".error-message").count() == 0
    assert page.errors == []


def test_hostile_criterion_ids_and_tasks_run_no_script(live_server, page, ingest, tmp_path):
    evil = '<img src=x onerror=alert(1)><svg onload=alert(2)>'
    records = []
    for i, verdict in enumerate(("pass", "fail", "pass")):
        rid = f"{evil}{i}"
        records += [{"type": "run_start", "run_id": rid, "task_id": rid, "experiment": evil, "variant": "e2e",
                     "criteria": [{"id": evil, "type": "command_executed", "pattern": "pytest"}]},
                    {"type": "step", "run_id": rid, "step": 0, "actions": [{"name": evil, "args": {"command": evil}}]},
                    {"type": "step", "run_id": rid, "step": 1, "actions": [{"name": "bash", "args": {"command": "pytest"}}]},
                    {"type": "step", "run_id": rid, "step": 2, "actions": []},
                    {"type": "run_end", "run_id": rid, "status": "completed", "verdict": verdict}]
    assert ingest(write_jsonl(tmp_path / "evil.jsonl", records)).ok
    query = f"experiment={quote(evil)}&variant=e2e"
    ready(live_server.url, query)
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{live_server.url}/lab?{query}&arm={quote(evil + ':pass')}")
    page.locator("svg.frontier-chart").wait_for()
    assert page.locator("#headline").inner_text().startswith("simulated Verdicts identical")
    assert evil in page.locator(".lab-policy h2").inner_text()
    assert page.evaluate(DOM_PROBE) == [] and dialogs == [] and page.errors == []


def test_the_lab_fits_1280_px_with_long_unbroken_strings(live_server, page, ingest, tmp_path):
    crit, task, command = "criterion_" + "C" * 300, "task_" + "T" * 300, "pytest " + "x" * 400
    records = []
    for i, verdict in enumerate(("pass", "fail", "pass", "fail")):
        rid = f"R{i}" + "R" * 190
        records += [{"type": "run_start", "run_id": rid, "task_id": task + str(i), "experiment": "long", "variant": "e2e",
                     "criteria": [{"id": crit, "type": "command_executed", "pattern": "pytest"},
                                  {"id": crit + "_end", "type": "type_" + "Y" * 200}]},
                    {"type": "step", "run_id": rid, "step": 0, "actions": [{"name": "bash", "args": {"command": command}}]},
                    {"type": "step", "run_id": rid, "step": 1, "actions": []},
                    {"type": "run_end", "run_id": rid, "status": "completed", "verdict": verdict}]
    assert ingest(write_jsonl(tmp_path / "long.jsonl", records)).ok
    ready(live_server.url, "experiment=long&variant=e2e")
    for url in ("/lab?experiment=long&variant=e2e", f"/lab?experiment=long&variant=e2e&arm={quote(crit)}:pass",
                "/lab/frontier?experiment=long&variant=e2e"):
        page.goto(live_server.url + url)
        page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true })")
        if "frontier" not in url:
            page.locator("svg.frontier-chart").wait_for()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, f"{url[:60]} is {width} px wide"


def test_where_runs_would_stop_adds_up_and_its_links_say_which_run(live_server, page, ingest, tmp_path):
    # "with none of the armed criteria" was a row like the others, so the table read 58 of 29
    # runs; the validation table's links were all named "run".
    assert ingest(*run_demo(tmp_path / "demo", tasks=24)).ok
    base, query = live_server.url, f"experiment={EXPERIMENT}&variant=e2e"
    want = ready(base, query + "&policy=1&max_steps=3")["summary"]
    page.goto(f"{base}/lab?{query}&policy=1&max_steps=3")
    rows = page.locator("#stops tr:not(.nothing-armed) td.num").all_inner_texts()
    assert sum(int(n) for n in rows) == want["paired"]
    if want["nothing_armed"]:
        assert page.locator("#stops tr.nothing-armed th").inner_text().startswith(f"of all {want['paired']} above:")
    links = page.locator("#validation a[href^='/runs/']")
    assert links.count() > 0
    names = {links.nth(i).get_attribute("aria-label") for i in range(links.count())}
    assert all(n and (n.startswith("recorded smoke run of ") or n.startswith("the run simulated for ")) for n in names)
    assert page.errors == []


def test_an_experiment_chosen_without_a_variant_simulates_its_full_variant(live_server, page, ingest, tmp_path):
    from tests.app.lab.test_routes import _three_variants

    _three_variants(tmp_path, ingest)
    ready(live_server.url, "experiment=three&variant=e2e")
    page.goto(f"{live_server.url}/lab?experiment=three&variant=mid")
    page.locator("details.lab-chooser summary").click()
    page.get_by_label("variant", exact=True).fill("")
    page.get_by_role("button", name="Choose runs").click()
    page.wait_for_url("**/lab?experiment=three&variant=&tag=&q=")
    summary = page.locator("details.lab-chooser summary")
    assert summary.locator("b").inner_text() == "variant e2e of experiment three"
    assert page.locator(".lab-variant-note").inner_text() == (
        "(the experiment has 3 variants, e2e, mid, smoke: the lab simulates one at a time)")
    assert "duplicate" not in summary.inner_text()
    assert page.get_by_label("variant", exact=True).input_value() == "e2e"
    assert page.errors == []
