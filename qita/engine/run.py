"""One run of the engine: preflight, the step loop, and the end of the run.

A step is observe -> decide -> act -> reduce -> critics -> stop check; each phase is a
method below, and `_Step` holds what the phases produce until the step record is
written. `docs/engine.md` states the rules in prose; the comments here say why.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from ..core import AgentState, Decision, RuntimeBudget, Task, ToolCall, Trajectory, Usage
from ..core.errors import StopReason
from ..criteria import Criterion, CriterionResult
from ..early_stop import LiveWatcher, compute_verdict
from ..live import LiveTracker
from ..writer import TraceWriter
from .critic import CONTINUE, RETRY, STOP, CriticPass, critic_name, run_critics
from .result import RunResult, Stop
from .snapshot import diff, jsonable, set_field, snapshot
from .stop_criteria import StopCriteria
from .tools import available_tools, call_tool

#: Stop reasons that mean the run never got going, rather than finishing or crashing.
_FAILED_REASONS = {StopReason.TASK_VALIDATION_FAILED, StopReason.ENV_CAPABILITY_MISMATCH}


@dataclass
class _Carry:
    """What one step hands to the next."""

    last_results: Optional[list[Any]] = None
    #: set when the next step is a retry: it sees the same observation again
    retry_observation: Any = None
    retrying: bool = False


@dataclass
class _Step:
    """One step in progress: what its phases produced so far."""

    index: int
    state: Any
    carry: _Carry
    ts: str
    started: float
    before: dict[str, Any]
    prior_final: Any
    observation: Any = None
    decision: Optional[Decision[Any]] = None
    results: list[Any] = field(default_factory=list)
    invocations: list[dict[str, Any]] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=lambda: {"input": 0, "output": 0, "total": 0})
    cost_usd: float = 0.0
    critics: CriticPass = field(default_factory=CriticPass)
    stop: Optional[Stop] = None

    @property
    def retry_next(self) -> bool:
        return self.stop is None and self.critics.action == RETRY

    def hand_over(self) -> _Carry:
        retry = self.retry_next
        return _Carry(last_results=self.results, retry_observation=self.observation if retry else None,
                      retrying=retry)


class _Run:
    """The mutable bookkeeping of one run (kept off the Engine so an Engine can run again)."""

    def __init__(self, engine: Any, task: Task, budget: RuntimeBudget, stop_criteria: list[StopCriteria],
                 budget_criteria: list[StopCriteria], armed: list[Criterion], writer: Optional[TraceWriter],
                 run_id: str):
        self.engine = engine
        self.agent = engine.agent
        self.task = task
        self.budget = budget
        self.stop_criteria = stop_criteria
        self.budget_criteria = budget_criteria
        self.armed = armed
        self.writer = writer
        self.run_id = run_id
        self.trajectory = Trajectory(task=task)
        # Every criterion with a live verdict is tracked, armed or not: the trace records
        # them step by step; the watcher acts on the armed ones only.
        self.live = LiveTracker(engine.criteria)
        self.watcher = LiveWatcher(armed=list(armed))
        self.fail_open_reported = False
        self.errors: list[dict[str, Any]] = []
        self.critic_errors: list[dict[str, Any]] = []
        self.tool_errors = 0
        self.steps_done = 0
        self.tokens = {"input": 0, "output": 0, "total": 0}
        self.cost = 0.0
        self.crash_detail: Optional[str] = None
        self.clock = engine.clock
        self.t0 = self.clock()
        self.wall0 = datetime.now(timezone.utc)

    # -- time and trace ---------------------------------------------------------------------
    def elapsed(self) -> float:
        return self.clock() - self.t0

    def now(self) -> str:
        """The trace timestamp: the real start time plus the engine clock's elapsed time."""
        return (self.wall0 + timedelta(seconds=self.elapsed())).isoformat()

    def event(self, phase: str, step: Optional[int], ok: bool = True, payload: Any = None, error: Any = None) -> None:
        if self.writer is not None:
            self.writer.event(phase, step=step, ok=ok, payload=payload, error=error, ts=self.now())

    def record_error(self, phase: str, step: Optional[int], exc: BaseException) -> str:
        text = f"{type(exc).__name__}: {exc}"
        self.errors.append({"phase": phase, "step": step, "error": text,
                            "traceback": traceback.format_exc(limit=8)})
        return text

    # -- the run ----------------------------------------------------------------------------
    def execute(self, init_kwargs: dict[str, Any]) -> RunResult:
        self._write_run_start()
        state, stop = self._preflight(init_kwargs)
        index, carry = 0, _Carry()
        while stop is None:
            step = self._step(index, state, carry)
            state, stop, carry = step.state, step.stop, step.hand_over()
            index += 1
        return self._finish(state, stop)

    def _write_run_start(self) -> None:
        if self.writer is None:
            return
        engine, task = self.engine, self.task
        self.writer.run_start(
            ts=self.now(), task_id=task.id, experiment=engine.experiment, variant=engine.variant,
            replicate=engine.replicate, objective=task.objective,
            agent=getattr(self.agent, "name", None) or type(self.agent).__name__, model=engine.model,
            budget=self.budget.to_record(), critics=[critic_name(c) for c in engine.critics],
            stop_criteria=[{"name": c.name, "params": c.params()} for c in self.stop_criteria],
            criteria=[c.spec() for c in engine.criteria], early_stop={"enabled": engine.stop_early},
            tags=engine.tags, metadata={**engine.metadata, **({"task": task.metadata} if task.metadata else {})},
        )

    # -- preflight --------------------------------------------------------------------------
    def _preflight(self, init_kwargs: dict[str, Any]) -> tuple[Any, Optional[Stop]]:
        """The state to start from, or the stop that ends the run before any step."""
        state: Any = None
        stop = self._refusal()
        if stop is None:
            try:
                state = self.agent.init_state(self.task, **init_kwargs)
                set_field(state, "stop_reason", None)
            except Exception as exc:
                stop = Stop(StopReason.UNRECOVERABLE_ERROR, self.record_error("INIT", None, exc))
        self.event("INIT", None, ok=stop is None,
                   payload={"task_id": self.task.id, "budget": self.budget.to_record(),
                            "armed": [c.id for c in self.armed]},
                   error=stop.detail if stop is not None else None)
        if state is None and stop is not None:
            # state.stop_reason is promised after every run: a run refused or broken before
            # the agent built its state gets a bare AgentState to carry it (init_state is
            # never called on a task the preflight refused).
            state = AgentState(task=self.task)
        if stop is None and self.budget.max_steps is not None and self.budget.max_steps <= 0:
            stop = Stop(StopReason.BUDGET_STEPS, f"max_steps={self.budget.max_steps} allows no step")
        return state, stop

    def _refusal(self) -> Optional[Stop]:
        """Why the task is refused before any step (invalid, or a tool it needs is missing)."""
        task = self.task
        try:
            validate = getattr(self.agent, "validate_task", None)
            problem = validate(task) if callable(validate) else None
            if not task.objective or not str(task.objective).strip():
                problem = problem or "task objective is empty"
            if problem:
                return Stop(StopReason.TASK_VALIDATION_FAILED, str(problem if problem is not True else "invalid"))
        except Exception as exc:
            return Stop(StopReason.TASK_VALIDATION_FAILED, f"{type(exc).__name__}: {exc}")
        tools = available_tools(self.engine.env, self.agent)
        missing = [t for t in task.required_tools if t not in tools]
        if missing:
            return Stop(StopReason.ENV_CAPABILITY_MISMATCH, f"missing tools: {missing}")
        return None

    # -- one step ---------------------------------------------------------------------------
    def _step(self, index: int, state: Any, carry: _Carry) -> _Step:
        step = self._begin_step(index, state, carry)
        self._agent_phases(step)
        self._account_usage(step)
        if step.stop is None:
            # Criteria may also look at the answer, not only at tool calls.
            self._watch(step.index, None)
            self._critic_phase(step)
            step.stop = self._check_stop(step)
        self._write_step(step)
        if step.retry_next:
            self._prepare_retry(step)
        return step

    def _begin_step(self, index: int, state: Any, carry: _Carry) -> _Step:
        ts, started = self.now(), self.clock()
        set_field(state, "step", index)
        drain = getattr(self.agent, "drain_usage", None)
        if callable(drain):
            drain()  # usage reported outside a step (e.g. in init_state) is not this step's
        return _Step(index=index, state=state, carry=carry, ts=ts, started=started, before=snapshot(state),
                     prior_final=getattr(state, "final_result", None))

    def _agent_phases(self, step: _Step) -> None:
        """Observe, decide, act, reduce. An exception from the agent ends the run (no recovery policy)."""
        for phase, run_phase in (("OBSERVE", self._observe_phase), ("DECIDE", self._decide_phase),
                                 ("ACT", self._act_phase), ("REDUCE", self._reduce_phase)):
            try:
                run_phase(step)
            except Exception as exc:
                step.stop = Stop(StopReason.UNRECOVERABLE_ERROR, self.record_error(phase, step.index, exc))
                self.event(phase, step.index, ok=False, error=step.stop.detail)
                return

    def _observe_phase(self, step: _Step) -> None:
        # A retried step sees the same observation again.
        if step.carry.retrying:
            step.observation = step.carry.retry_observation
        else:
            step.observation = self._observe(step.state, step.index, step.carry.last_results)
        self.event("OBSERVE", step.index, payload={"retry": step.carry.retrying})

    def _observe(self, state: Any, index: int, last_results: Optional[list[Any]]) -> Any:
        for source in (self.engine.env, self.agent):
            observe = getattr(source, "observe", None)
            if callable(observe):
                return observe(state, last_results)
        observation: dict[str, Any] = {"task": self.task.objective, "step": index}
        if last_results is not None:
            observation["last_results"] = last_results
        return observation

    def _decide_phase(self, step: _Step) -> None:
        decision = self.agent.decide(step.state, step.observation)
        if not isinstance(decision, Decision):
            raise TypeError(f"decide() returned {type(decision).__name__}, expected Decision")
        step.decision = decision
        self.event("DECIDE", step.index, payload={"mode": decision.mode, "actions": len(decision.actions)})

    def _act_phase(self, step: _Step) -> None:
        tools = available_tools(self.engine.env, self.agent)
        for action in step.decision.actions:
            index = len(self.trajectory.tool_calls) + 1
            started = self.clock()
            outcome = call_tool(tools, action)
            if outcome.error is not None:
                self.tool_errors += 1
            step.results.append(outcome.result)
            step.invocations.append({"tool_name": action.name, "call_index": index,
                                     "latency_ms": round((self.clock() - started) * 1000.0, 3),
                                     "status": outcome.status, "error": outcome.error})
            self.trajectory.tool_calls.append(ToolCall(index=index, step=step.index, name=action.name,
                                                       args=action.args, result=outcome.result,
                                                       status=outcome.status, error=outcome.error))
            # Live verdicts are evaluated at tool-call granularity, as each call completes.
            self._watch(step.index, index)
        self.event("ACT", step.index, ok=all(i["status"] == "ok" for i in step.invocations),
                   payload={"tools": [i["tool_name"] for i in step.invocations]})

    def _reduce_phase(self, step: _Step) -> None:
        observation = step.observation
        seen = (dict(observation, action_results=step.results) if isinstance(observation, dict)
                else {"observation": observation, "action_results": step.results})
        before_reduce = getattr(step.state, "final_result", None)
        new_state = self.agent.reduce(step.state, seen, step.decision)
        if new_state is not None:
            step.state = new_state
        # A final decision is the step's answer unless reduce() chose to write one itself.
        if step.decision.is_final and getattr(step.state, "final_result", None) == before_reduce:
            set_field(step.state, "final_result", step.decision.final_answer)
        self.event("REDUCE", step.index)

    def _account_usage(self, step: _Step) -> None:
        """Tokens and cost: whatever the decision carried plus anything reported during the step."""
        usages: list[Usage] = []
        if step.decision is not None and step.decision.usage is not None:
            usages.append(step.decision.usage)
        drain = getattr(self.agent, "drain_usage", None)
        if callable(drain):
            usages.extend(drain())
        step_in = sum(int(u.input) for u in usages)
        step_out = sum(int(u.output) for u in usages)
        step.tokens = {"input": step_in, "output": step_out, "total": step_in + step_out}
        step.cost_usd = round(sum(float(u.cost_usd) for u in usages), 8)
        for key, value in step.tokens.items():
            self.tokens[key] += value
        self.cost = round(self.cost + step.cost_usd, 8)
        self.steps_done = step.index + 1
        self.trajectory.steps = self.steps_done
        self.trajectory.final_result = getattr(step.state, "final_result", None)
        self.trajectory.state = step.state

    def _watch(self, index: int, tool_call_index: Optional[int]) -> None:
        self.live.observe(self.trajectory, index, tool_call_index)
        self.watcher.update(self.live, index, tool_call_index)
        if self.watcher.failed_open is not None and not self.fail_open_reported:
            self.fail_open_reported = True
            self.event("EARLY_STOP", index, ok=False, payload={"fail_open": True},
                       error=self.watcher.failed_open["error"])

    def _critic_phase(self, step: _Step) -> None:
        step.critics = run_critics(self.engine.critics, step.state, step.decision, step.results)
        self.critic_errors.extend({**e, "step": step.index} for e in step.critics.errors)
        self.event("CRITIC", step.index, ok=not step.critics.errors,
                   payload={"action": step.critics.action, "critics": len(step.critics.outputs)})

    # -- stop rules -------------------------------------------------------------------------
    def _check_stop(self, step: _Step) -> Optional[Stop]:
        """The first stop rule that fires at the end of this step (docs/engine.md, "Order and precedence")."""
        stop: Optional[Stop] = None
        if step.critics.action == STOP:
            deciding = step.critics.deciding or {}
            stop = Stop(StopReason.CRITIC_STOP,
                        deciding.get("reason") or f"critic {deciding.get('critic')} returned stop")
        elif step.critics.action == CONTINUE:
            set_field(step.state, "retry_feedback", None)
            stop = self._natural_stop(step)
        # Budgets are hard limits: they apply even on a step the critics sent back for retry.
        stop = stop or self._first_stop(self.budget_criteria, step.state)
        # Early stop fires only when nothing else would have ended the run here, so an
        # early_stop record always means steps were actually avoided.
        stop = stop or self._early_stop()
        self.event("CHECK_STOP", step.index,
                   payload={"stop": stop is not None, "stop_reason": stop.reason.value if stop else None,
                            "detail": stop.detail if stop else None,
                            "retry_next": stop is None and step.critics.action == RETRY})
        return stop

    def _natural_stop(self, step: _Step) -> Optional[Stop]:
        """Once the critics passed: the agent's own word, the stop criteria, should_stop, the env."""
        preset = getattr(step.state, "stop_reason", None)
        if preset:
            return Stop(_as_reason(preset, StopReason.SUCCESS), "stop_reason set by the agent")
        stop = self._first_stop(self.stop_criteria, step.state)
        if stop is not None:
            return stop
        should_stop = getattr(self.agent, "should_stop", None)
        if callable(should_stop) and should_stop(step.state):
            return Stop(StopReason.AGENT_CONDITION, "agent.should_stop() returned True")
        is_terminal = getattr(self.engine.env, "is_terminal", None)
        if callable(is_terminal) and is_terminal(step.state, step.results):
            return Stop(StopReason.ENV_TERMINAL, "environment reported a terminal state")
        return None

    def _runtime_info(self) -> dict[str, Any]:
        return {"elapsed_seconds": self.elapsed(), "total_tokens": self.tokens["total"],
                "input_tokens": self.tokens["input"], "output_tokens": self.tokens["output"],
                "cost_usd": self.cost, "step_count": self.steps_done, "max_steps": self.budget.max_steps}

    def _first_stop(self, criteria: list[StopCriteria], state: Any) -> Optional[Stop]:
        info = self._runtime_info()
        for criterion in criteria:
            should, reason, detail = criterion.should_stop(state, self.steps_done, info)
            if should:
                return Stop(_as_reason(reason, StopReason.SUCCESS), detail)
        return None

    def _early_stop(self) -> Optional[Stop]:
        decision = self.watcher.decision
        if decision is None:
            return None
        verdict = "passed" if decision.reason == "criterion_passed" else "failed"
        return Stop(StopReason.EARLY_STOP, f"armed criteria decided; {decision.deciding_criterion} {verdict}")

    # -- the step record --------------------------------------------------------------------
    def _write_step(self, step: _Step) -> None:
        if self.writer is None:
            return
        decision = step.decision
        record = {
            "observation": jsonable(step.observation),
            "decision": decision.to_record() if decision is not None else None,
            "actions": [a.to_record() for a in decision.actions] if decision is not None else [],
            "action_results": jsonable(step.results),
            "tool_invocations": step.invocations,
            "critic_outputs": step.critics.outputs,
            "state_diff": diff(step.before, snapshot(step.state)),
            "tokens": step.tokens,
            "cost_usd": step.cost_usd,
            "retry": step.carry.retrying,
            "duration_s": round(self.clock() - step.started, 6),
        }
        if self.live.criteria:
            record["live_verdicts"] = self.live.verdicts()
        self.writer.step(step.index, ts=step.ts, **record)

    def _prepare_retry(self, step: _Step) -> None:
        # An answer the critics rejected must not end the run on the next check.
        if getattr(step.state, "final_result", None) != step.prior_final:
            set_field(step.state, "final_result", step.prior_final)
        deciding = step.critics.deciding or {}
        set_field(step.state, "retry_feedback",
                  {"critic": deciding.get("critic"), "reason": deciding.get("reason"), "step": step.index})

    # -- the end of the run -----------------------------------------------------------------
    def _finish(self, state: Any, stop: Stop) -> RunResult:
        set_field(state, "stop_reason", stop.reason)
        final = getattr(state, "final_result", None)
        self.trajectory.final_result = final
        self.trajectory.state = state
        elapsed = self.elapsed()
        self.event("END", self.steps_done - 1 if self.steps_done else None,
                   ok=stop.reason != StopReason.UNRECOVERABLE_ERROR,
                   payload={"stop_reason": stop.reason.value, "steps": self.steps_done})
        stopped_early = stop.reason == StopReason.EARLY_STOP
        results = self._grade(stopped_early)
        verdict = compute_verdict(self.engine.criteria, results, stopped_early, [c.id for c in self.armed])
        early_record = self._early_stop_record(elapsed) if stopped_early else None
        failure_report = self._failure_report()
        status = _status(stop.reason)
        if self.writer is not None:
            final_text = None if final is None else (final if isinstance(final, str) else str(final))
            self.writer.run_end(ts=self.now(), status=status, stop_reason=stop.reason.value, stop_detail=stop.detail,
                                final_result=final_text, verdict=verdict, steps=self.steps_done,
                                tool_calls=len(self.trajectory.tool_calls),
                                tokens=dict(self.tokens), cost_usd=self.cost, elapsed_s=round(elapsed, 6),
                                failure_report=failure_report, stopped_early=stopped_early)
        return RunResult(state=state, run_id=self.run_id, task=self.task, stop_reason=stop.reason,
                         stop_detail=stop.detail, status=status, final_result=final, verdict=verdict,
                         steps=self.steps_done, tokens=dict(self.tokens), cost_usd=self.cost, elapsed_s=elapsed,
                         criteria=results, early_stop=early_record, failure_report=failure_report,
                         trace_path=self.writer.path if self.writer is not None else None)

    def _grade(self, stopped_early: bool) -> dict[str, CriterionResult]:
        """Grade every criterion on the whole trajectory and write its `criterion` record."""
        armed_ids = {c.id for c in self.armed}
        results: dict[str, CriterionResult] = {}
        for c in self.engine.criteria:
            try:
                results[c.id] = c.check(self.trajectory)
            except Exception as exc:
                text = f"{type(exc).__name__}: {exc}"
                self.errors.append({"phase": "GRADE", "criterion": c.id, "error": text})
                results[c.id] = CriterionResult(score=0.0, passed=False, details={"error": text})
            if self.writer is not None:
                r = results[c.id]
                armed = c.id in armed_ids
                self.writer.criterion(c.id, score=r.score, passed=r.passed, details=jsonable(r.details),
                                      live_verdict=self.watcher.verdicts.get(c.id, "undecided") if armed else None,
                                      decided_at_step=self.watcher.decided_at.get(c.id),
                                      armed=armed, gating=c.gating, advisory=stopped_early and not armed)
        return results

    def _early_stop_record(self, elapsed: float) -> Optional[dict[str, Any]]:
        decision = self.watcher.decision
        if decision is None:
            return None
        turns_remaining = (max(0, self.budget.max_steps - self.steps_done)
                           if self.budget.max_steps is not None else None)
        record = {"reason": decision.reason, "deciding_criterion": decision.deciding_criterion,
                  "armed_criteria": decision.armed_criteria, "step": self.steps_done - 1,
                  "decided_at_step": decision.step, "tool_call_index": decision.tool_call_index,
                  "elapsed_s": round(elapsed, 6), "turns_remaining": turns_remaining}
        if self.writer is not None:
            self.writer.early_stop(**record)
        return record

    def _failure_report(self) -> dict[str, Any]:
        report: dict[str, Any] = {}
        if self.errors:
            report["errors"] = self.errors
        if self.critic_errors:
            report["critic_errors"] = self.critic_errors
        if self.tool_errors:
            report["tool_errors"] = self.tool_errors
        if self.watcher.failed_open is not None:
            report["early_stop_fail_open"] = self.watcher.failed_open
        if self.live.errors:
            report["live_verdict_errors"] = [{k: e[k] for k in ("criterion", "error", "step", "tool_call_index")}
                                             for e in self.live.errors.values()]
        return report


def _status(reason: StopReason) -> str:
    if reason == StopReason.UNRECOVERABLE_ERROR:
        return "error"
    return "failed" if reason in _FAILED_REASONS else "completed"


def _as_reason(value: Any, fallback: StopReason) -> StopReason:
    if isinstance(value, StopReason):
        return value
    try:
        return StopReason(str(value))
    except ValueError:
        return fallback
