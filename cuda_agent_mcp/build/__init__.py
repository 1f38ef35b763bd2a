"""Incremental, content-addressed builds of a workspace into the `cuda_extension` module."""

from cuda_agent_mcp.build.builder import Builder, BuildLimits, BuildProgress, ProgressCallback
from cuda_agent_mcp.build.cache import BuildCache
from cuda_agent_mcp.build.flags import BuildFlags, detect_arch
from cuda_agent_mcp.build.toolchain import Toolchain, discover_toolchain
from cuda_agent_mcp.cache_dir import default_cache_dir

__all__ = [
    "BuildCache",
    "BuildFlags",
    "BuildLimits",
    "BuildProgress",
    "Builder",
    "ProgressCallback",
    "Toolchain",
    "default_cache_dir",
    "detect_arch",
    "discover_toolchain",
]
