"""Policy presets: which model drives the loop, how to serve it with vLLM, how to sample, what budgets.

A preset is a directory with `policy.yaml` and the system prompt it names (see `policies/README.md`).
Bundled presets live in the repository's `policies/` (or inside the wheel); a path to any directory
with a `policy.yaml` works too, which is how a checkpoint trained with this project registers.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuda_agent_mcp.errors import PolicyError
from cuda_agent_mcp.results import KernelLanguage
from cuda_agent_mcp.workspace.harness import harness_text
from cuda_agent_mcp.workspace.layout import LANGUAGE_FILES

_HERE = Path(__file__).resolve().parent
# An editable install reads the repository's policies/; a wheel carries them as _bundled_policies/.
BUNDLED_DIRS = (_HERE.parent.parent / "policies", _HERE.parent / "_bundled_policies")


SKILL_GUIDE_MARK = "{{SKILL_GUIDE}}"  # replaced by the skill guide every workspace of the language gets


def skill_guide(language: KernelLanguage = "cuda") -> str:
    """The SKILL.md a new workspace in `language` starts with (without a task's rules)."""
    return harness_text(LANGUAGE_FILES[language] / "SKILL.md")


class VllmServing(BaseModel):
    """How `vllm serve` runs this policy (`cuda-agent policy serve NAME` prints the command)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tensor_parallel_size: int = Field(default=1, ge=1)
    max_model_len: int = Field(default=32768, ge=1024)
    tool_call_parser: str | None = Field(
        default=None, description="vLLM --tool-call-parser; None for policies that answer in plain text"
    )
    reasoning_parser: str | None = None
    gpu_memory_utilization: float = Field(default=0.90, gt=0, le=1)
    extra_args: list[str] = Field(default_factory=list)


class Sampling(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(default=0.7, ge=0, le=2)
    top_p: float = Field(default=0.95, gt=0, le=1)
    max_completion_tokens: int = Field(default=8192, ge=1)


class Budgets(BaseModel):
    """Limits on one trajectory; the first one reached ends it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_turns: int = Field(default=30, ge=1)
    max_tokens: int = Field(
        default=1_000_000, ge=1, description="prompt + completion tokens over the trajectory"
    )
    max_wall_s: float = Field(default=3600.0, gt=0)
    max_gpu_s: float = Field(default=900.0, gt=0, description="wall time of verify/profile/evaluate calls")
    max_invalid_calls: int = Field(default=5, ge=1, description="consecutive malformed or unknown tool calls")


class ContextPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_context_tokens: int = Field(
        default=28000, ge=1000, description="estimated prompt size above which old tool outputs are dropped"
    )
    max_tool_output_chars: int = Field(default=6000, ge=200, description="longer tool outputs are truncated")
    keep_recent_turns: int = Field(default=4, ge=1, description="turns whose tool outputs are never dropped")


class PolicyPreset(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str
    model: str = Field(description="model id (Hugging Face or the endpoint's name) or a local path")
    served_model_name: str | None = Field(
        default=None, description="name the endpoint knows it by, if not `model`"
    )
    lora_adapter: str | None = Field(
        default=None, description="path or id of a LoRA adapter served with the model"
    )
    base_url: str | None = Field(default=None, description="default endpoint; --base-url overrides")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="environment variable holding the API key")
    action_format: Literal["tools", "text"] = Field(
        default="tools",
        description="tools: OpenAI tool calls; text: the model answers with fenced files, each answer is "
        "written and evaluated (for kernel models trained without tool calling)",
    )
    tools: list[str] = Field(
        default_factory=lambda: [
            "read_file",
            "write_file",
            "edit_file",
            "list_files",
            "compile",
            "verify",
            "profile",
            "evaluate",
        ]
    )
    system_prompt_file: str = "system_prompt.md"
    vllm: VllmServing | None = Field(
        default_factory=VllmServing, description="None: served by its own endpoint, not by vLLM"
    )
    sampling: Sampling = Sampling()
    budgets: Budgets = Budgets()
    context: ContextPolicy = ContextPolicy()
    verified: str = Field(default="", description="what was checked about this preset, and what was not")
    directory: Path | None = Field(default=None, exclude=True)

    @property
    def endpoint_model(self) -> str:
        """The `model` field of each request: the adapter's name when one is served, else the model's."""
        if self.lora_adapter:
            return self.name
        return self.served_model_name or self.model

    def system_prompt(self, language: KernelLanguage = "cuda") -> str:
        """The preset's prompt with the skill guide of the workspace's kernel language: the policy is
        told how to write the language its workspace builds, never another's. A prompt that itself names
        a language's files has a sibling per other language (`system_prompt.cupy.md`), used when present."""
        if self.directory is None:
            raise PolicyError(f"policy {self.name} has no directory to read its system prompt from")
        path = self.directory / self.system_prompt_file
        if language != "cuda" and (own := path.with_name(f"{path.stem}.{language}{path.suffix}")).is_file():
            path = own
        try:
            text = path.read_text()
        except OSError as exc:
            raise PolicyError(f"policy {self.name}: cannot read {path}: {exc.strerror}") from None
        return text.replace(SKILL_GUIDE_MARK, skill_guide(language))


def policy_dirs() -> list[Path]:
    return [d for d in BUNDLED_DIRS if d.is_dir()]


def list_policies() -> list[PolicyPreset]:
    seen: dict[str, PolicyPreset] = {}
    for base in policy_dirs():
        for child in sorted(base.iterdir()):
            if (child / "policy.yaml").is_file() and child.name not in seen:
                seen[child.name] = load_policy(str(child))
    return list(seen.values())


def load_policy(name_or_path: str) -> PolicyPreset:
    """A bundled preset by name, or any directory (or policy.yaml file) by path."""
    candidate = Path(name_or_path).expanduser()
    if candidate.is_file() and candidate.name == "policy.yaml":
        candidate = candidate.parent
    if not (candidate / "policy.yaml").is_file():
        found = [d / name_or_path for d in policy_dirs() if (d / name_or_path / "policy.yaml").is_file()]
        if not found:
            names = ", ".join(p.name for p in list_policies()) or "none"
            raise PolicyError(f"no policy {name_or_path!r} (bundled: {names}; or give a directory)")
        candidate = found[0]
    try:
        import yaml
    except ImportError:
        raise PolicyError("reading policies needs PyYAML (a core dependency): pip install pyyaml") from None
    try:
        data = yaml.safe_load((candidate / "policy.yaml").read_text())
    except yaml.YAMLError as exc:
        raise PolicyError(f"{candidate / 'policy.yaml'} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise PolicyError(f"{candidate / 'policy.yaml'} must be a mapping")
    data.setdefault("name", candidate.name)
    try:
        preset = PolicyPreset.model_validate({**data, "directory": candidate})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise PolicyError(f"{candidate / 'policy.yaml'}: {problems}") from None
    preset.system_prompt()  # a preset whose prompt is missing is refused now, not on the first turn
    from cuda_agent_mcp.agent.actions import ACTIONS

    unknown = sorted(set(preset.tools) - set(ACTIONS))
    if unknown:
        raise PolicyError(f"{candidate / 'policy.yaml'}: unknown tools {unknown}; known: {sorted(ACTIONS)}")
    return preset


def vllm_command(preset: PolicyPreset, *, host: str = "127.0.0.1", port: int = 8000) -> list[str]:
    """The `vllm serve` command line for a preset (OpenAI-compatible server with tool calling)."""
    serving = preset.vllm
    if serving is None:
        raise PolicyError(f"policy {preset.name} is served by its own endpoint, not by vLLM")
    command = ["vllm", "serve", preset.model, "--host", host, "--port", str(port)]
    if preset.served_model_name:
        command += ["--served-model-name", preset.served_model_name]
    command += [
        "--tensor-parallel-size",
        str(serving.tensor_parallel_size),
        "--max-model-len",
        str(serving.max_model_len),
        "--gpu-memory-utilization",
        str(serving.gpu_memory_utilization),
    ]
    if serving.tool_call_parser:
        command += ["--enable-auto-tool-choice", "--tool-call-parser", serving.tool_call_parser]
    if serving.reasoning_parser:
        command += ["--reasoning-parser", serving.reasoning_parser]
    if preset.lora_adapter:
        command += ["--enable-lora", "--lora-modules", f"{preset.name}={preset.lora_adapter}"]
    return command + list(serving.extra_args)


def shell_line(command: list[str]) -> str:
    return shlex.join(command)
