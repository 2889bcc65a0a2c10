"""The exact-type fast acceptance in app.ingest.lines never accepts what the pydantic models reject."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from qita.format import RECORD_MODELS
from qita_board.ingest.lines import _fast_event, _fast_step, check_record

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=3))
anyjson = st.recursive(scalars, lambda c: st.one_of(st.lists(c, max_size=2), st.dictionaries(st.text(max_size=3), c, max_size=2)),
                       max_leaves=4)


def field(*options):
    return st.one_of(anyjson, *options)


action = st.fixed_dictionaries({}, optional={"name": field(st.text(max_size=3)), "args": anyjson})
critic = st.fixed_dictionaries({}, optional={"critic": field(st.text(max_size=3)), "action": field(st.sampled_from(["stop", "retry"])),
                                             "reason": anyjson, "score": anyjson, "details": anyjson})
step = st.fixed_dictionaries({"type": st.just("step"), "run_id": st.just("r")}, optional={
    "step": field(st.integers(-2, 5)), "ts": anyjson, "duration_s": anyjson, "cost_usd": anyjson, "retry": anyjson,
    "decision": field(st.fixed_dictionaries({}, optional={"mode": anyjson, "rationale": anyjson, "final_answer": anyjson,
                                                           "actions": field(st.lists(action, max_size=2))})),
    "actions": field(st.lists(action, max_size=2)), "critic_outputs": field(st.lists(critic, max_size=2)),
    "action_results": anyjson, "tool_invocations": field(st.lists(anyjson, max_size=2)), "state_diff": anyjson,
    "tokens": field(st.fixed_dictionaries({}, optional={"input": anyjson, "output": anyjson, "total": anyjson})),
    "live_verdicts": field(st.dictionaries(st.text(max_size=3), field(st.sampled_from(["pass", "fail", "undecided"])),
                                           max_size=2)),
})
event = st.fixed_dictionaries({"type": st.just("event"), "run_id": st.just("r")}, optional={
    "step": anyjson, "phase": anyjson, "ok": anyjson, "ts": anyjson, "payload": anyjson})


def _valid(model, value) -> bool:
    try:
        model.model_validate(value)
        return True
    except ValidationError:
        return False


@settings(max_examples=400, deadline=None)
@given(step)
def test_fast_step_is_sound(value) -> None:
    if _fast_step(value):
        assert _valid(RECORD_MODELS["step"], value)


@settings(max_examples=300, deadline=None)
@given(event)
def test_fast_event_is_sound(value) -> None:
    if _fast_event(value):
        assert _valid(RECORD_MODELS["event"], value)


def test_rejections_keep_the_model_message() -> None:
    assert check_record({"type": "step", "run_id": "r", "step": -1}).endswith("greater than or equal to 0")
    assert check_record({"type": "event", "run_id": "r"}) == "missing field 'phase'"
    # a null critic action is read as absent (continue): the fast path declines, the models accept
    assert check_record({"type": "step", "run_id": "r", "step": 0, "critic_outputs": [{"action": None}]}) is None
    assert check_record({"type": "step", "run_id": "r", "step": "x"}) is not None
    assert check_record({"type": "step", "run_id": "r", "step": 3, "critic_outputs": [{"critic": "c", "action": "stop"}]}) is None
