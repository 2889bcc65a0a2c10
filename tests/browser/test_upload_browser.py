"""Uploading in real Chromium: the file picker and the drop zone, then the result with links and rejected lines."""

from __future__ import annotations

import orjson

from tests.browser.test_pages_browser import until

TRACE = b"".join(orjson.dumps(r) + b"\n" for r in [
    {"type": "run_start", "run_id": "browser/run", "task_id": "t1", "criteria": [{"id": "c1"}]},
    {"type": "criterion", "run_id": "browser/run", "id": "c1", "score": 1.0},
]) + b"not json at all\n" + orjson.dumps({"type": "run_end", "run_id": "browser/run", "status": "completed",
                                           "stop_reason": "final"}) + b"\n"


def upload(page, base: str, name: str, body: bytes, mime: str = "application/x-ndjson") -> None:
    """One file sent through the upload form, and its result waited for."""
    page.goto(base + "/upload")
    page.set_input_files("#files", files=[{"name": name, "mimeType": mime, "buffer": body}])
    page.get_by_role("button", name="Upload").click()
    page.locator(".upload-result").wait_for()


def test_upload_with_the_file_picker(live_server, page):
    page.goto(live_server.url + "/upload")
    page.set_input_files("#files", files=[{"name": "picked.jsonl", "mimeType": "application/x-ndjson", "buffer": TRACE}])
    assert "picked.jsonl" in page.locator("#chosen").inner_text()
    page.get_by_role("button", name="Upload").click()
    result = page.locator(".upload-result")
    result.wait_for()
    assert "picked.jsonl:3: invalid JSON" in result.locator(".rejected").inner_text()
    link = result.locator(".runs-created a")
    assert link.inner_text() == "browser/run"
    link.click()
    page.wait_for_url("**/runs/browser%2Frun")
    assert "final answer" in page.locator(".run-head .badges").inner_text()
    assert page.errors == []


def test_upload_by_dropping_a_file(live_server, page):
    page.goto(live_server.url + "/upload")
    data = page.evaluate_handle("""(text) => {
        const dt = new DataTransfer();
        dt.items.add(new File([text], "dropped.jsonl", {type: "application/x-ndjson"}));
        return dt;
    }""", TRACE.decode())
    page.dispatch_event("#drop-zone", "drop", {"dataTransfer": data})
    result = page.locator(".upload-result")
    result.wait_for()
    assert result.locator(".runs-created a").inner_text() == "browser/run"
    assert "dropped.jsonl:3:" in result.locator(".rejected").inner_text()
    # The same file again: nothing new.
    page.dispatch_event("#drop-zone", "drop", {"dataTransfer": data})
    page.locator("#upload-unchanged").wait_for()
    assert page.errors == []


def test_a_file_of_blank_lines_says_it_holds_no_records_then_nothing_new(live_server, page):
    for expected in ("#upload-no-records", "#upload-unchanged"):
        page.goto(live_server.url + "/upload")
        page.set_input_files("#files", files=[{"name": "blank.jsonl", "mimeType": "application/x-ndjson",
                                                "buffer": b"\n\n\r\n"}])
        page.get_by_role("button", name="Upload").click()
        page.locator(".upload-result").wait_for()
        shown = page.locator(".upload-result p.muted").first
        assert shown.get_attribute("id") == expected[1:]
    assert page.locator("#upload-unchanged").inner_text() == (
        "Nothing new: these files were uploaded before with the same content.")
    page.goto(live_server.url + "/upload")
    page.set_input_files("#files", files=[{"name": "other-blank.jsonl", "mimeType": "application/x-ndjson",
                                            "buffer": b"\n"}])
    page.get_by_role("button", name="Upload").click()
    assert page.locator("#upload-no-records").inner_text() == (
        "No records: this file holds no trace lines (empty, or blank lines only).")
    assert page.errors == []


def _version(objective: str, score: float) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in [
        {"type": "run_start", "run_id": "browser/v", "objective": objective, "criteria": [{"id": "c1"}]},
        {"type": "step", "run_id": "browser/v", "step": 0, "observation": objective},
        {"type": "criterion", "run_id": "browser/v", "id": "c1", "score": score},
        {"type": "run_end", "run_id": "browser/v", "status": "completed", "stop_reason": "final"}])


def test_a_new_version_under_the_same_name_is_named_in_the_result_and_on_the_run(live_server, page):
    for objective, score in (("first version", 1.0), ("second version", 0.0)):
        page.goto(live_server.url + "/upload")
        page.set_input_files("#files", files=[{"name": "same.jsonl", "mimeType": "application/x-ndjson",
                                                "buffer": _version(objective, score)}])
        page.get_by_role("button", name="Upload").click()
        page.locator(".upload-result").wait_for()
    warning = page.locator(".upload-result .warnings").inner_text()
    assert "run 'browser/v' was loaded again from the new version of same.jsonl: it had 1 step, pass, it has " \
           "1 step, fail (changed: run_start, steps, criteria)" in warning  # run_end is the same in both
    page.goto(live_server.url + "/runs/browser%2Fv")
    head = page.locator(".run-head").inner_text()
    assert "second version" in head and "first version" not in head
    assert "was loaded again from the new version of same.jsonl" in page.content()
    assert page.errors == []


def test_records_refused_or_added_to_a_run_another_file_began_are_named_by_their_own_lines(live_server, page):
    # both warnings named line 1, the run_start, not a record either was about
    first = _version("first version", 1.0)
    second = first + orjson.dumps({"type": "step", "run_id": "browser/v", "step": 1, "observation": "late"}) + b"\n"
    second = second.replace(b'"observation":"first version"', b'"observation":"changed"')
    for name, body in (("began.jsonl", first), ("other.jsonl", second)):
        upload(page, live_server.url, name, body)
    items = page.locator(".upload-result .warnings li").all_inner_texts()
    assert [t.split(": run ")[0] for t in items if "was begun by" in t] == ["⚠ other.jsonl:2", "⚠ other.jsonl:5"]
    assert page.errors == []


def test_a_copy_under_another_name_lists_its_runs_as_unchanged_with_nothing_to_remove(live_server, page):
    body = _version("only version", 1.0)
    for name in ("first.jsonl", "copy.jsonl"):
        upload(page, live_server.url, name, body)
    result = page.locator(".upload-result")
    assert result.locator(".runs-unchanged a").all_inner_texts() == ["browser/v"]
    assert result.locator(".runs-updated, .runs-created, .upload-remove").count() == 0
    assert "Runs already stored, unchanged (1)" in result.locator("h3").first.inner_text()
    result.locator(".runs-unchanged a").click()
    page.wait_for_url("**/runs/browser%2Fv")
    assert "only version" in page.locator(".run-head").inner_text()
    assert page.errors == []


def test_upload_with_no_file_chosen_says_so_without_a_request(live_server, page):
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.method + " " + r.url))
    page.goto(live_server.url + "/upload")
    page.get_by_role("button", name="Upload").click()
    assert page.locator("#upload-status").inner_text() == "Choose a file first, or drop one on the box above."
    assert not [r for r in requests if r.startswith("POST")]
    assert page.errors == []


def test_two_files_of_one_name_in_one_upload_are_two_files(live_server, page):
    # Two versions of one "same.jsonl" in one pick: both runs are made, and the bad line
    # is named by the file it is in (the second is "same (2).jsonl").
    first = _version("first file", 1.0).replace(b"browser/v", b"browser/a")
    second = _version("second file", 0.0).replace(b"browser/v", b"browser/b") + b"[1]\n"
    page.goto(live_server.url + "/upload")
    page.set_input_files("#files", files=[{"name": "same.jsonl", "mimeType": "application/x-ndjson", "buffer": first},
                                          {"name": "same.jsonl", "mimeType": "application/x-ndjson", "buffer": second}])
    page.get_by_role("button", name="Upload").click()
    result = page.locator(".upload-result")
    result.wait_for()
    assert sorted(result.locator(".runs-created a").all_inner_texts()) == ["browser/a", "browser/b"]
    lines = len(second.splitlines())
    assert result.locator(".rejected").inner_text() == f"same (2).jsonl:{lines}: not a JSON object (got an array)"
    assert page.errors == []


def test_a_binary_file_named_jsonl_is_one_rejection_beside_a_good_file(live_server, page):
    # 64 KB of bytes 0-255 named .jsonl was listed as 257 rejected "lines", one per newline
    # byte in it: now the file is named once, and the good file beside it is read.
    page.goto(live_server.url + "/upload")
    page.set_input_files("#files", files=[
        {"name": "photo.jsonl", "mimeType": "application/x-ndjson", "buffer": bytes(range(256)) * 256},
        {"name": "good.jsonl", "mimeType": "application/x-ndjson", "buffer": TRACE}])
    page.get_by_role("button", name="Upload").click()
    result = page.locator(".upload-result")
    result.wait_for()
    rejected = result.locator(".rejected li").all_inner_texts()
    assert rejected == ["photo.jsonl:1: binary data (a NUL byte in its first bytes), not a JSON Lines file: "
                        "the file was not read",
                        "good.jsonl:3: invalid JSON: invalid literal, expected 'null': line 1 column 1 (char 0)"]
    assert result.locator(".runs-created a").inner_text() == "browser/run"
    assert page.errors == []


def test_back_from_an_uploaded_run_shows_the_upload_result_and_its_record_keeps_the_bad_lines(live_server, page):
    # Back (or a reload) showed an empty upload form: the rejected lines were gone, and the
    # upload's own page did not list them either.
    upload(page, live_server.url, "back.jsonl", TRACE)
    until(page, "location.pathname.startsWith('/upload/jobs/')")
    job_url = page.url
    page.locator(".upload-result .runs-created a").click()
    page.wait_for_url("**/runs/browser%2Frun")
    page.go_back()
    page.wait_for_url(job_url)
    assert "back.jsonl:3: invalid JSON" in page.locator(".upload-result .rejected").inner_text()
    page.reload()
    assert "back.jsonl:3: invalid JSON" in page.locator(".upload-result .rejected").inner_text()
    page.locator(".upload-result a", has_text="remove what this upload added…").wait_for()
    page.goto(live_server.url + page.locator(".upload-result a.upload-remove").get_attribute("href").removesuffix("/delete"))
    assert page.locator('section[aria-label="Rejected lines"] .rejected li').all_inner_texts() == [
        "back.jsonl:3: invalid JSON: invalid literal, expected 'null': line 1 column 1 (char 0)"]
    assert page.errors == []


def test_a_file_name_holding_a_right_to_left_override_does_not_reverse_the_others(live_server, page):
    # "rlo\u202etxt.jsonl" beside "b.jsonl" showed "chosen: rlolnosj.b ,lnosj.txt": a faked
    # extension and the next name drawn backwards.
    page.goto(live_server.url + "/upload")
    page.set_input_files("#files", files=[
        {"name": "rlo\u202etxt.jsonl", "mimeType": "application/x-ndjson", "buffer": TRACE},
        {"name": "b.jsonl", "mimeType": "application/x-ndjson", "buffer": TRACE}])
    # where the first and the last letter of "b.jsonl" are drawn: left to right, as written
    xs = page.evaluate("""() => {
        const node = document.getElementById('chosen').firstChild;
        const at = node.data.indexOf('b.jsonl');
        const x = i => { const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
                         return r.getBoundingClientRect().left; };
        return [x(at), x(at + 6)];
    }""")
    assert xs[0] < xs[1]
    assert page.errors == []


def test_a_trace_saved_as_json_is_read(live_server, page):
    upload(page, live_server.url, "trace.json", TRACE, "application/json")
    assert page.locator(".upload-result .runs-created a").inner_text() == "browser/run"
    assert page.locator(".upload-result .rejected li").all_inner_texts() == [
        "trace.json:3: invalid JSON: invalid literal, expected 'null': line 1 column 1 (char 0)"]
    assert page.errors == []


LEAVING = "(() => { const e = new Event('beforeunload', {cancelable: true}); window.dispatchEvent(e); return e.defaultPrevented; })()"


def test_leaving_the_page_while_the_files_are_sent_asks_first(live_server, page):
    # the page navigated away mid-send and the upload was lost without a word (seen in an audit)
    held = []
    page.route("**/*", lambda route: held.append(route) if route.request.method == "POST" else route.continue_())
    page.goto(live_server.url + "/upload")
    assert page.evaluate(LEAVING) is False                                   # nothing being sent: no question
    page.set_input_files("#files", files=[{"name": "held.jsonl", "mimeType": "application/x-ndjson", "buffer": TRACE}])
    page.get_by_role("button", name="Upload").click()
    deadline = 50
    while not held and deadline:
        page.wait_for_timeout(100)
        deadline -= 1
    assert held, "the upload was not sent"
    assert page.evaluate(LEAVING) is True                                    # the browser asks before leaving
    held[0].continue_()
    page.locator(".upload-result").wait_for()
    assert page.evaluate(LEAVING) is False                                   # answered: reading goes on there
    assert page.errors == []
