"""The demo experiment: shape, stop-reason mix, determinism, and the smoke-vs-e2e A/B claim."""

from collections import Counter

from qita_helpers import of_type, read_records

from qita.demo import run_demo
from qita.demo_tasks import build_tasks

VOLATILE = {"ts", "duration_s", "elapsed_s", "latency_ms"}


def _stable(x):
    if isinstance(x, dict):
        return {k: _stable(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [_stable(v) for v in x]
    return x


def _runs(paths):
    runs = {}
    for p in paths:
        records = read_records(p)
        start, end = records[0], records[-1]
        runs[(start["variant"], start["task_id"], start["replicate"])] = {
            "start": start, "end": end, "early": of_type(records, "early_stop"), "records": records,
            "steps": of_type(records, "step")}
    return runs


def test_demo_shape(tmp_path):
    paths = run_demo(tmp_path, tasks=24, seed=0)
    runs = _runs(paths)
    tasks = {t for (_, t, _) in runs}
    assert len(tasks) == 24
    replicated = {t for (v, t, r) in runs if r == 1}
    assert replicated and all(("smoke", t, 1) in runs and ("e2e", t, 1) in runs for t in replicated)
    assert {r["start"]["experiment"] for r in runs.values()} == {"demo-early-stop-ab"}
    assert {v for (v, _, _) in runs} == {"smoke", "e2e"}
    for (variant, _, _), run in runs.items():
        assert run["start"]["early_stop"]["enabled"] is (variant == "smoke")
        assert run["start"]["model"] and variant in run["start"]["tags"]
        assert all(s["tokens"]["total"] > 0 and s["cost_usd"] > 0 for s in run["steps"])
    assert len(paths) == len(set(paths)) == len(runs)


def test_demo_has_a_realistic_mix_of_stop_reasons(tmp_path):
    runs = _runs(run_demo(tmp_path))
    reasons = Counter(r["end"]["stop_reason"] for r in runs.values())
    for reason in ("final", "budget_steps", "budget_tokens", "critic_stop", "stagnation", "early_stop"):
        assert reasons[reason] > 0, reason
    early = Counter(r["early"][0]["reason"] for r in runs.values() if r["early"])
    assert early["criterion_passed"] > 0 and early["criterion_failed"] > 0
    assert all(r["end"]["stop_reason"] != "early_stop" for (v, _, _), r in runs.items() if v == "e2e")
    assert any(s["retry"] for r in runs.values() for s in r["steps"])
    assert any(o["action"] == "retry" for r in runs.values() for s in r["steps"] for o in s["critic_outputs"])


def test_demo_is_deterministic_apart_from_timing(tmp_path):
    a = run_demo(tmp_path / "a", tasks=10, seed=5)
    b = run_demo(tmp_path / "b", tasks=10, seed=5)
    assert [p.relative_to(tmp_path / "a") for p in a] == [p.relative_to(tmp_path / "b") for p in b]
    for pa, pb in zip(a, b):
        assert _stable(read_records(pa)) == _stable(read_records(pb))


def test_running_the_demo_twice_into_one_folder_does_not_duplicate_runs(tmp_path):
    run_demo(tmp_path, tasks=4)
    paths = run_demo(tmp_path, tasks=4)
    for p in paths:
        assert [r["type"] for r in read_records(p)].count("run_start") == 1


def test_ab_smoke_matches_e2e_verdicts_with_fewer_steps_and_tokens(tmp_path):
    runs = _runs(run_demo(tmp_path))
    whole_story = {t.id for t in build_tasks(24, 0) if t.whole_story}
    pairs = [(runs[("smoke", t, r)], runs[("e2e", t, r)]) for (v, t, r) in runs if v == "e2e" and t in whole_story]
    assert len(pairs) >= 20
    for smoke, e2e in pairs:
        assert smoke["end"]["verdict"] == e2e["end"]["verdict"], smoke["start"]["task_id"]
        assert smoke["end"]["steps"] <= e2e["end"]["steps"]
        assert smoke["end"]["tokens"]["total"] <= e2e["end"]["tokens"]["total"]
    stopped = [(s, e) for s, e in pairs if s["early"]]
    assert len(stopped) >= 10
    for smoke, e2e in stopped:
        assert smoke["end"]["steps"] < e2e["end"]["steps"]
        assert smoke["end"]["tokens"]["total"] < e2e["end"]["tokens"]["total"]
    assert sum(s["end"]["steps"] for s, _ in pairs) < sum(e["end"]["steps"] for _, e in pairs)


def test_ab_when_the_armed_criterion_is_not_the_whole_story_verdicts_can_differ(tmp_path):
    runs = _runs(run_demo(tmp_path))
    partial = {t.id for t in build_tasks(24, 0) if not t.whole_story}
    differ = [t for (v, t, r) in runs if v == "e2e" and t in partial
              and runs[("smoke", t, r)]["end"]["verdict"] != runs[("e2e", t, r)]["end"]["verdict"]]
    # smoke gates only on "ran the tests"; e2e also needs the answer to say what was fixed
    assert differ
    for t in differ:
        crit = {c["id"]: c for c in of_type(runs[("smoke", t, 0)]["records"], "criterion")}
        assert crit["says_fixed"]["advisory"] is True
