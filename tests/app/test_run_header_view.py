"""The run header's view data (app.present): the setup panel and the verdict lane are
shaped in Python, so the template only shows them."""

from __future__ import annotations

from qita_board import present


def test_named_critics_are_tags_and_others_values_with_their_pointer_path():
    setup = present.run_setup({"critics": ["lint", {"kind": "judge"}]})
    assert setup["critics"]["items"] == [{"name": "lint"},
                                         {"value": {"kind": "judge"}, "path": ("run", "critics", 1)}]
    assert setup["stop_criteria"] is None and setup["meta"] is None and setup["failure_report"] is None


def test_critics_that_are_not_a_list_are_one_value():
    assert present.critics_setup("x") == {"items": None, "whole": {"value": "x", "path": ("run", "critics")}}


def test_stop_criteria_with_a_name_show_their_params_path():
    view = present.stop_criteria_setup([{"name": "max_steps", "params": {"n": 3}}, {"name": "bare"}, 7])
    assert view["items"] == [
        {"name": "max_steps", "params": {"value": {"n": 3}, "path": ("run", "stop_criteria", 0, "params")}},
        {"name": "bare", "params": None},
        {"name": None, "whole": {"value": 7, "path": ("run", "stop_criteria", 2)}}]


def test_a_failure_report_is_listed_empty_or_a_value():
    listed = present.failure_report_view({"failures": ["a", "b"], "note": "n"})
    assert listed["kind"] == "listed" and listed["count"] == 2
    assert listed["failures"][1] == {"value": "b", "path": ("run", "failure_report", "failures", 1)}
    assert listed["others"] == [{"key": "note", "value": "n", "path": ("run", "failure_report", "note")}]
    assert present.failure_report_view({}) == {"kind": "empty", "count": None}
    assert present.failure_report_view({"failure_count": 4, "text": "x"})["kind"] == "value"
    assert present.failure_report_view("boom")["whole"]["path"] == ("run", "failure_report")


def test_a_run_with_no_setup_has_no_panel():
    assert present.run_setup({"critics": None}) is None


def test_a_lane_mark_carries_its_label_score_bar_and_title():
    mark = present.lane_mark({"step": 4, "last": 7, "action": "retry", "score": 0.64, "retry": 1})
    assert mark == {"step": 4, "action": "retry", "retried": True, "label": "R", "score_class": "s6",
                    "title": "step 4–7: retry 0.64"}
    bare = present.lane_mark({"step": 2, "last": 2, "action": None, "score": None, "retry": 0})
    assert (bare["action"], bare["label"], bare["score_class"], bare["title"]) == ("none", "–", "sx", "step 2: no critic")
