"""The LLM composer against the scripted OpenAI-compatible server (the stand-in for a model): the prompt
in the repository names the sampled seed operators, answers become candidates, and a bad answer is
refused by the filters with its reason while the run goes on."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.errors import EndpointError
from cuda_agent_mcp.synth.llm_compose import compose_prompt, program_from_answer, sample_ops
from cuda_agent_mcp.synth.pipeline import synthesize
from cuda_agent_mcp.synth.settings import LlmComposerSettings, SynthesisSettings
from tests.agent.scripted_llm import ScriptedLLM, serve
from tests.synth import programs

pytest.importorskip("openai")

SEED = 5


def _settings(url: str, count: int) -> SynthesisSettings:
    return SynthesisSettings(
        count=count, seed=SEED, composer="llm", device="cpu", runtime=False, compile=False,
        llm=LlmComposerSettings(base_url=url, model="scripted", api_key_env="NO_SUCH_KEY_VARIABLE"),
    )  # fmt: skip


def _answer(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def test_answers_become_candidates_and_bad_ones_are_refused_with_a_reason(tmp_path: Path) -> None:
    answers = {
        0: f"Here it is:\n```python\n{programs.SOUND}```\n",
        1: f"```python\n{programs.NOT_PYTHON}```",
        2: "I cannot help with that.",
    }
    # Requests run in parallel: each index's reply is keyed by the seed the composer sends with it.
    llm = ScriptedLLM(replies=[], by_seed={SEED * 1_000_003 + i: _answer(a) for i, a in answers.items()})
    with serve(llm):
        report = anyio.run(lambda: synthesize(_settings(llm.url, 3), tmp_path / "run", workers=1))
    assert report.accepted == 1
    prompts = [r["messages"][0]["content"] for r in llm.requests]
    for index in range(3):
        names = [op.name for op in sample_ops(SEED, index, 5)]
        assert any(" -> ".join(names) in p for p in prompts)
    rejected = {
        r["index"]: r for r in map(json.loads, (tmp_path / "run" / "rejected.jsonl").read_text().splitlines())
    }
    assert rejected[1]["reason"].startswith("line 1: syntax error")
    assert (
        rejected[2]["reason"]
        == "the composer failed: the answer holds no program: 'I cannot help with that.'"
    )
    candidates = [
        json.loads(line) for line in (tmp_path / "run" / "candidates.jsonl").read_text().splitlines()
    ]
    assert {c["notes"]["model"] for c in candidates} == {"scripted"}

    # Resumed: the endpoint is not asked again for what it already answered.
    asked = len(llm.requests)
    with serve(llm):
        again = anyio.run(lambda: synthesize(_settings(llm.url, 3), tmp_path / "run", workers=1))
    assert len(llm.requests) == asked and again.accepted == 1


def test_an_endpoint_that_fails_is_one_error_naming_it(tmp_path: Path) -> None:
    settings = _settings("http://127.0.0.1:9/v1", 2)  # nothing listens on the discard port
    with pytest.raises(EndpointError, match="the composer's endpoint"):
        anyio.run(lambda: synthesize(settings, tmp_path / "run", workers=1))


def test_the_prompt_lives_in_the_repository_and_asks_for_the_format() -> None:
    prompt = compose_prompt()
    assert "{ops}" in prompt and "get_init_inputs" in prompt and "no dropout" in prompt


def test_the_program_is_the_last_fenced_block() -> None:
    assert program_from_answer("a\n```python\nx = 1\n```\nb\n```py\ny = 2\n```") == "y = 2\n"
    assert program_from_answer("no fence here") == "no fence here\n"


def test_sampled_operators_follow_the_seed() -> None:
    assert [o.name for o in sample_ops(1, 4, 5)] == [o.name for o in sample_ops(1, 4, 5)]
    assert all(len(sample_ops(2, i, 2)) <= 2 for i in range(50))
