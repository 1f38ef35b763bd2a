"""Open a report in headless Chromium: what its console printed, and a screenshot (the report's own
check, used by its test and by `bench report --screenshot`). Chromium is not a dependency: Debian's
`chromium` package, found on PATH; every network feature that could reach out is off."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from cuda_agent_mcp.errors import UsageError

# The flags that work as root on machines without a network (see the environment notes in docs/bench.md).
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
)  # fmt: skip
_CONSOLE = re.compile(r":CONSOLE[^\]]*\]\s*(.*)")


class BrowserRun(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    console: list[str]
    screenshot: str | None
    returncode: int | None


def find_chromium() -> str | None:
    return next(
        (
            found
            for name in ("chromium", "chromium-browser", "google-chrome")
            if (found := shutil.which(name))
        ),
        None,
    )


def open_page(
    page: Path, screenshot: Path, *, width: int = 1400, height: int = 1100, timeout_s: float = 120
) -> BrowserRun:
    """Load `page` (a file) once, headless, with a fresh profile; every console line it logged."""
    chromium = find_chromium()
    if chromium is None:
        raise UsageError("no chromium on PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="cuda-agent-chromium-") as profile:
        argv = [chromium, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={screenshot}",
                f"--window-size={width},{height}", page.resolve().as_uri()]  # fmt: skip
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return BrowserRun(console=["chromium timed out"], screenshot=None, returncode=None)
    console = [m.group(1) for line in done.stderr.splitlines() if (m := _CONSOLE.search(line))]
    return BrowserRun(
        console=console,
        screenshot=str(screenshot) if screenshot.is_file() else None,
        returncode=done.returncode,
    )
