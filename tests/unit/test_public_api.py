"""The public API is exactly what __all__ lists, so it cannot grow by accident (httpx's rule)."""

import cuda_agent_mcp


def test_all_lists_every_public_name_and_only_those() -> None:
    public = sorted(n for n in dir(cuda_agent_mcp) if not n.startswith("_") and n not in {"annotations"})
    modules = {
        "adapters", "agent", "bench", "build", "cache_dir", "cli", "env", "errors", "evaluation", "executors", "isolation", "judge", "results", "server", "synth", "tasks", "tools", "training", "wire", "worker",
        "workspace",
    }  # fmt: skip
    assert sorted(cuda_agent_mcp.__all__) == [n for n in public if n not in modules]
    assert cuda_agent_mcp.__all__ == sorted(cuda_agent_mcp.__all__)
