"""The agent loop against a scripted OpenAI-wire server: the real client, tool layer, build and judge."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.agent import Budgets, load_trajectory, run_episode
from cuda_agent_mcp.agent.context import DROPPED
from tests.agent.conftest import BROKEN, CORRECT, CPU, WRONG, copy_example_kernels, make_session
from tests.agent.scripted_llm import tool_call, turn

pytestmark = pytest.mark.nvcc


def _episode(session, preset, client, path: Path, **options):
    return anyio.run(lambda: run_episode(session, preset, client, path, settings=CPU, **options))


def test_a_wrong_kernel_then_a_fixed_one_ends_with_the_best_verified_version_restored(
    session, kernel_files, scripted, tmp_path: Path
) -> None:
    """evaluate is the final answer: it ends the run, and the workspace keeps the best verified files."""
    writes = [tool_call("write_file", {"path": p, "content": c}) for p, c in kernel_files.items()]
    script = [
        turn(*writes, tool_call("write_file", {"path": "model_new.py", "content": WRONG})),
        turn(tool_call("compile", {}), tool_call("verify", {"trials": 2})),
        turn(
            tool_call("edit_file", {"path": "model_new.py", "old_text": " * 2", "new_text": ""}),
            tool_call("verify", {"trials": 2}),
        ),
        turn(tool_call("write_file", {"path": "model_new.py", "content": BROKEN})),  # never verified
        turn(tool_call("evaluate", {"trials": 2}), tool_call("list_files", {})),
        turn(content="never asked for: evaluate ended the run"),
    ]
    with scripted(script) as (llm, preset, client):
        result = _episode(session, preset, client, tmp_path / "t.jsonl")

    assert result.stop_reason == "evaluated" and not result.truncated
    assert result.turns == 5 and len(llm.requests) == 5
    assert result.best is not None and result.best.turn == 3
    assert (session.workspace.root / "model_new.py").read_text() == CORRECT  # not the broken last write
    trajectory = load_trajectory(tmp_path / "t.jsonl")
    wrong, fixed = (r for r in trajectory.tools if r.name == "verify")
    assert wrong.result["verdict"]["status"] == "wrong_output" and not wrong.verified
    assert fixed.verified and fixed.code_hash == result.best.code_hash
    evaluated, after = trajectory.tools[-2:]
    assert evaluated.name == "evaluate" and evaluated.valid and not evaluated.verified
    assert after.name == "list_files" and not after.valid and "episode ended (evaluated)" in after.error
    assert trajectory.end is not None and trajectory.end.last_files["model_new.py"] == BROKEN
    # The real wire format: tool specs went out, and each tool result answered its call by id.
    first, second = llm.requests[0], llm.requests[1]
    assert {t["function"]["name"] for t in first["tools"]} >= {"write_file", "compile", "verify", "evaluate"}
    answered = {m["tool_call_id"] for m in second["messages"] if m["role"] == "tool"}
    assert answered == {c["id"] for c in script[0]["tool_calls"]}


def test_malformed_and_unknown_calls_get_readable_errors_until_the_limit_stops_the_policy(
    session, scripted, tmp_path: Path
) -> None:
    script = [
        turn(tool_call("write_file", '{"path": "model_new.py", "content": ')),
        turn(tool_call("rm_rf", {"path": "/"})),
        turn(tool_call("write_file", {"path": "model_new.py"})),
        turn(tool_call("verify", {"trials": 2, "audit": False})),  # the audit is not the policy's to switch
    ]
    with scripted(script) as (llm, preset, client):
        budgets = preset.budgets.model_copy(update={"max_invalid_calls": 4})
        result = _episode(session, preset, client, tmp_path / "t.jsonl", budgets=budgets)

    assert result.stop_reason == "invalid_tool_calls"
    assert result.invalid_calls == 4 and result.best is None
    errors = [r.error for r in load_trajectory(tmp_path / "t.jsonl").tools]
    assert "not valid JSON" in errors[0]
    assert "unknown tool 'rm_rf'" in errors[1]
    assert "content: Field required" in errors[2]
    assert "audit: Extra inputs are not permitted" in errors[3]
    observations = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert all(o.startswith("error: ") for o in observations)


def test_budgets_end_the_run_cleanly(session, scripted, tmp_path: Path) -> None:
    listing = [turn(tool_call("list_files", {})) for _ in range(10)]
    with scripted(listing) as (_, preset, client):
        by_turns = _episode(session, preset, client, tmp_path / "a.jsonl", budgets=Budgets(max_turns=2))
    with scripted(listing, tokens_per_reply=100) as (_, preset, client):
        by_tokens = _episode(session, preset, client, tmp_path / "b.jsonl", budgets=Budgets(max_tokens=250))

    assert (by_turns.stop_reason, by_turns.turns, by_turns.truncated) == ("turn_budget", 2, True)
    assert (by_tokens.stop_reason, by_tokens.turns, by_tokens.tokens) == ("token_budget", 3, 300)
    assert load_trajectory(tmp_path / "b.jsonl").end.stop_reason == "token_budget"


def test_long_outputs_are_truncated_and_old_ones_dropped_near_the_context_budget(
    session, scripted, tmp_path: Path
) -> None:
    big = "".join(f"// line {i:05d} of a long file\n" for i in range(400))
    script = [turn(tool_call("write_file", {"path": "kernels/notes.h", "content": big}))]
    script += [turn(tool_call("read_file", {"path": "kernels/notes.h"})) for _ in range(5)]
    with scripted(script) as (llm, preset, client):
        preset = preset.model_copy(
            update={
                "context": preset.context.model_copy(
                    update={"max_tool_output_chars": 2000, "max_context_tokens": 2000, "keep_recent_turns": 2}
                )
            }
        )
        _episode(session, preset, client, tmp_path / "t.jsonl")

    tool_messages = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert "characters truncated" in tool_messages[-1] and len(tool_messages[-1]) <= 2000
    assert DROPPED in tool_messages[:-2]  # oldest outputs made room
    assert DROPPED not in tool_messages[-2:]  # the recent turns are kept whole
    assert llm.requests[-1]["messages"][0]["role"] == "system"  # and the system prompt too


def test_a_run_resumes_from_its_trajectory_in_a_fresh_workspace(
    session, kernel_files, scripted, tmp_path: Path, shared_build_cache: Path
) -> None:
    writes = [tool_call("write_file", {"path": p, "content": c}) for p, c in kernel_files.items()]
    first_half = [turn(*writes), turn(tool_call("write_file", {"path": "model_new.py", "content": CORRECT}))]
    with scripted(first_half) as (_, preset, client):
        stopped = _episode(session, preset, client, tmp_path / "first.jsonl", budgets=Budgets(max_turns=2))
    assert stopped.stop_reason == "turn_budget" and stopped.best is None

    fresh = make_session(tmp_path, shared_build_cache, name="ws2")
    with scripted([turn(tool_call("evaluate", {"trials": 2}))]) as (llm, preset, client):
        resumed = _episode(
            fresh, preset, client, tmp_path / "second.jsonl", resume=load_trajectory(tmp_path / "first.jsonl")
        )

    assert resumed.best is not None and resumed.turns == 3  # two recorded turns, then evaluate ends it
    assert resumed.stop_reason == "evaluated"
    assert (fresh.workspace.root / "model_new.py").read_text() == CORRECT
    continued = llm.requests[0]["messages"]
    assert len(continued) > 2  # the recorded conversation continued
    called = [c["id"] for m in continued if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in continued if m["role"] == "tool"]
    assert called and answered == called  # every recorded call with its answer, in order
    whole = load_trajectory(tmp_path / "second.jsonl")
    assert whole.header.resumed_from is not None and len(whole.tools) == len(writes) + 2


def test_a_text_format_policy_answers_with_files_and_gets_each_evaluation_back(
    session, kernel_files, scripted, tmp_path: Path
) -> None:
    def answer(model_new: str) -> dict:
        blocks = [f"```cuda {p}\n{c}```" for p, c in kernel_files.items()]
        return turn(content="\n".join([*blocks, f"```python model_new.py\n{model_new}```"]))

    with scripted(
        [answer(WRONG), answer(CORRECT), turn(content="No further changes.")], policy="kevin-32b"
    ) as (
        llm,
        preset,
        client,
    ):
        result = _episode(session, preset, client, tmp_path / "t.jsonl")

    assert result.stop_reason == "policy_finished" and result.best is not None and result.best.turn == 2
    assert "tools" not in llm.requests[0]
    feedback = llm.requests[1]["messages"][-1]
    assert feedback["role"] == "user" and "wrong_output" in feedback["content"]
    assert (session.workspace.root / "model_new.py").read_text() == CORRECT


def test_best_of_n_keeps_the_best_sample_and_records_each_seed(session, scripted, tmp_path: Path) -> None:
    from cuda_agent_mcp.agent import best_of

    def script_for(model_new: str) -> list[dict]:
        return [
            turn(tool_call("write_file", {"path": "model_new.py", "content": model_new})),
            turn(tool_call("verify", {"trials": 2})),
        ]

    copy_example_kernels(session)  # each sample starts from the user's workspace
    with scripted([], by_seed={7: script_for(WRONG), 8: script_for(CORRECT)}) as (_, preset, client):
        winner, results = anyio.run(
            lambda: best_of(session, preset, client, 2, tmp_path / "runs", settings=CPU, seed=7)
        )

    assert winner is not None and winner.seed == 8
    assert sorted(r.seed for r in results) == [7, 8]
    assert (session.workspace.root / "model_new.py").read_text() == CORRECT
    headers = [load_trajectory(tmp_path / "runs" / f"sample-{i}.jsonl").header for i in (0, 1)]
    assert [h.sampling["seed"] for h in headers] == [7, 8]
    assert json.loads(json.dumps(headers[0].sampling))["temperature"] == preset.sampling.temperature


def test_the_live_view_gets_each_turn_tool_compile_status_and_gpu_queue(
    session, scripted, tmp_path: Path
) -> None:
    from cuda_agent_mcp.executors.scheduler import GpuScheduler

    copy_example_kernels(session)
    session.scheduler = GpuScheduler([0])
    events = []
    with scripted([turn(tool_call("compile", {})), turn(tool_call("list_files", {}))]) as (_, preset, client):
        _episode(session, preset, client, tmp_path / "t.jsonl", on_event=events.append)

    assert [(e.kind, e.tool) for e in events] == [
        ("turn", None), ("tool", "compile"), ("turn", None), ("tool", "list_files"), ("turn", None), ("end", None)
    ]  # fmt: skip
    assert events[0].compile_ok is None and events[1].compile_ok is True
    assert events[-1].detail == "policy_finished" and not events[-1].best_verified
    assert all(e.gpu_queue == "gpu 0 idle; 0 waiting" for e in events)
