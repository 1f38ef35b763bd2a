"""Issue 16's principles, each attacked by a candidate that has read the judge's code (CPU, real workers).

The candidates here are pure PyTorch (the judge runs on the CPU); what they attack is the protocol and
the process boundary, which are the same on the GPU. GPU-only attacks (CUDA IPC memory, kernel traces)
are in tests/gpu/test_principles_gpu.py.
"""

from __future__ import annotations

import json
import re

import pytest

from cuda_agent_mcp.evaluation.job import TimingPolicy
from cuda_agent_mcp.results import ContractViolation, Crashed, Passed, Rejected, WrongOutput
from tests.evaluator.conftest import HONEST, REFERENCE, judge

BODY = "return (x * self.scale).clamp_min(0)"

# Everything a candidate can look at from inside its process that might tell a checked call from a
# timed one: dispatch modes, the profiler, the garbage collector, threads, environment, the callers'
# frames (their function names and local variable names), grad mode, the working directory.
OBSERVER = """
import gc, inspect, json, os, sys, threading
import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

SEEN = []

def observe():
    frames = []
    frame = sys._getframe(2)
    while frame is not None:
        frames.append(frame.f_code.co_name + ":" + ",".join(sorted(frame.f_locals)))
        frame = frame.f_back
    return json.dumps({
        "dispatch_mode": type(_get_current_dispatch_mode()).__name__,
        "profiler": bool(torch.autograd.profiler._is_profiler_enabled),
        "gc": gc.isenabled(),
        "threads": threading.active_count(),
        "env": sorted(os.environ),
        "frames": frames,
        "grad": torch.is_grad_enabled(),
        "cwd": os.getcwd() == os.environ.get("HOME"),
    }, sort_keys=True)
"""


def observing(report_after: int) -> str:
    """A correct candidate that records what it observes on every call, and after `report_after` calls
    raises with the distinct observations in its message (the only way out of its process)."""
    return (
        OBSERVER
        + HONEST.split("import torch.nn as nn", 1)[1].replace(
            BODY,
            "SEEN.append(observe())\n"
            f"        if len(SEEN) == {report_after}:\n"
            "            raise RuntimeError('OBSERVED' + json.dumps(sorted(set(SEEN))) + 'END')\n"
            f"        {BODY}",
        )
    ).replace("class ModelNew", "import torch.nn as nn\n\nclass ModelNew")


def run_in(directory, candidate: str, **job: object):
    directory.mkdir()
    return judge(directory, candidate, **job)


def observations(message: str) -> list[dict]:
    found = re.search(r"RuntimeError: OBSERVED(.*?)END", message, re.S)
    assert found, message
    return [json.loads(item) for item in json.loads(found.group(1))]


def test_a_candidate_sees_nothing_that_tells_a_checked_call_from_a_timed_one(tmp_path) -> None:
    """Principle 1. The same observations in every call of a verify and of a profile (warm-up, timed and
    checked batches): so a candidate that behaves only while checked is checked while it misbehaves."""
    one_call_per_batch = TimingPolicy(min_samples=5, max_samples=8, budget_s=1.0, window_ms=0)
    verify = run_in(tmp_path / "v", observing(8), mode="verify")
    profile = run_in(tmp_path / "p", observing(9), mode="profile", timing=one_call_per_batch)
    for report in (verify, profile):
        assert isinstance(report.verdict, Crashed), report.verdict
    seen_in_verify = observations(verify.verdict.message)
    seen_in_profile = observations(profile.verdict.message)
    assert len(seen_in_verify) == 1, seen_in_verify  # every verify call looked the same
    assert seen_in_profile == seen_in_verify  # and so did every profile call, timed or not
    assert seen_in_verify[0]["dispatch_mode"] == "NoneType" and not seen_in_verify[0]["profiler"]


def test_a_candidate_that_cheats_whenever_no_op_recorder_is_watching_fails_verify(run_judge) -> None:
    """The op recorder is an observed pass of its own: verify's trials run without it, so a candidate
    that computes honestly only under a dispatch mode is wrong in the trials themselves."""
    cheat = HONEST.replace(
        BODY,
        "from torch.utils._python_dispatch import _get_current_dispatch_mode\n"
        "        if _get_current_dispatch_mode() is None:\n"
        "            return torch.zeros_like(x)\n"
        f"        {BODY}",
    )
    report = run_judge(cheat)
    assert isinstance(report.verdict, WrongOutput), report.verdict
    assert report.verdict.phase == "verify"


def test_every_batch_of_a_profile_is_checked_with_the_shifted_distribution_among_them(run_judge) -> None:
    """A candidate that is wrong only on inputs with negative values fails while being timed, too: the
    profile interleaves checked batches of the shifted distribution, which look like any other."""
    range_cheat = HONEST.replace(BODY, "return x * self.scale.clamp_min(0)")  # right while x >= 0
    report = run_judge(range_cheat, mode="profile")
    assert isinstance(report.verdict, WrongOutput), report.verdict
    assert report.verdict.phase == "timed" and report.verdict.distribution == "shifted"


def test_every_timed_output_gets_the_precision_check(run_judge) -> None:
    """Principle 1's second half: the full contract and the precision check on every timed output."""
    half = HONEST.replace(BODY, "return (x.half() * self.scale.half()).float().clamp_min(0)")
    report = run_judge(half, mode="profile", max_error_norm=1e-4)
    assert isinstance(report.verdict, Rejected), report.verdict
    assert report.verdict.reason == "precision_downgrade"


@pytest.mark.parametrize(
    ("body", "reference_returns"),
    [
        ("return x", None),
        (
            "y = (x * self.scale).clamp_min(0); return y, y",
            "return torch.relu(x * self.scale), torch.relu(x * self.scale)",
        ),
        (
            "y = (x * self.scale).clamp_min(0); return y, y[:, :]",
            "return torch.relu(x * self.scale), torch.relu(x * self.scale)",
        ),
    ],
    ids=["returns-its-input", "one-tensor-twice", "a-view-of-another-output"],
)
def test_outputs_never_alias_an_input_or_each_other(
    run_judge, body: str, reference_returns: str | None
) -> None:
    """Principle 10."""
    reference = REFERENCE
    if reference_returns:
        reference = REFERENCE.replace("return torch.relu(x * self.scale)", reference_returns)
    elif body == "return x":
        reference = REFERENCE.replace("return torch.relu(x * self.scale)", "return x.clone()")
    report = run_judge(HONEST.replace(BODY, body), reference=reference)
    assert isinstance(report.verdict, ContractViolation), report.verdict
    assert report.verdict.check == "aliasing"


def test_short_calls_are_timed_in_batches_that_fill_the_window(run_judge) -> None:
    """Principle 4: a call far shorter than the window is timed in batches of many calls, so the 5%
    tolerances are never smaller than a call; the per-call samples are kept for intervals."""
    report = run_judge(
        HONEST, mode="profile", timing=TimingPolicy(min_samples=5, max_samples=8, budget_s=1.0)
    )
    assert isinstance(report.verdict, Passed), report.verdict
    stats = report.candidate
    assert stats is not None and stats.batch_calls > 1
    assert len(stats.samples_ms) == stats.samples
    # On the CPU there is no device trace: the evidence is missing, so no reward above correctness.
    assert report.evidence_missing and report.evidence_missing[0].startswith("kernel_trace")


def test_a_later_evaluation_finds_nothing_an_earlier_worker_left(tmp_path) -> None:
    """Principle 6: HOME, TMPDIR and /dev/shm as a worker sees them are private to one evaluation."""
    writer = HONEST.replace(
        "        super().__init__()",
        "        super().__init__()\n"
        "        import os, tempfile\n"
        "        for place in (os.environ['HOME'], tempfile.gettempdir(), '/dev/shm'):\n"
        "            try:\n"
        "                open(os.path.join(place, 'left-by-candidate'), 'w').write('cached answer')\n"
        "            except OSError:\n"
        "                pass",
    )
    reader = HONEST.replace(
        BODY,
        "import os, tempfile\n"
        "        found = [p for p in (os.environ['HOME'], tempfile.gettempdir(), '/dev/shm') if os.path.exists(os.path.join(p, 'left-by-candidate'))]\n"
        "        if found:\n"
        "            raise RuntimeError('FOUND ' + repr(found))\n"
        f"        {BODY}",
    )
    assert isinstance(run_in(tmp_path / "a", writer).verdict, Passed)
    report = run_in(tmp_path / "b", reader)
    assert isinstance(report.verdict, Passed), report.verdict


def test_the_worker_cannot_signal_the_judge(run_judge) -> None:
    """Principle 2's last clause: the judge (here this test process) is outside the worker's Landlock
    domain, so even signal 0 to it is refused; the candidate reports what it got in its exception."""
    from cuda_agent_mcp.isolation.landlock import abi_version

    if abi_version() < 6:
        pytest.skip("Landlock signal scoping needs ABI 6 (Linux 6.12)")
    probe = HONEST.replace(
        BODY,
        "import os\n"
        "        def parent(pid):\n"
        "            for line in open(f'/proc/{pid}/status'):\n"
        "                if line.startswith('PPid:'):\n"
        "                    return int(line.split()[1])\n"
        "        judge = parent(os.getppid())  # the worker's parent is the fork server; its parent the judge\n"
        "        try:\n"
        "            os.kill(judge, 0)\n"
        "            outcome = 'delivered'\n"
        "        except PermissionError:\n"
        "            outcome = 'EPERM'\n"
        "        raise RuntimeError(f'SIGNAL {judge} {outcome}')",
    )
    report = run_judge(probe)
    assert isinstance(report.verdict, Crashed)
    assert f"SIGNAL {__import__('os').getpid()} EPERM" in report.verdict.message


def test_the_hidden_size_plan_is_reported_with_the_verdict(run_judge) -> None:
    """Principle 9: a task with literal sizes still gets a hidden-size trial, and the report says how."""
    report = run_judge(HONEST)
    assert report.hidden_sizes.startswith("leading dimension")
    fixed = REFERENCE.replace(
        "return [torch.rand(64, 32)]", "return [torch.rand(64, 32), torch.rand(32, 64)]"
    ).replace(
        "def forward(self, x):\n        return torch.relu(x * self.scale)",
        "def forward(self, x, w):\n        return torch.relu(x * self.scale) @ w",
    )
    matmul = HONEST.replace("def forward(self, x):", "def forward(self, x, w):").replace(
        BODY, "return (x * self.scale).clamp_min(0) @ w"
    )
    report = run_judge(matmul, reference=fixed)
    assert isinstance(report.verdict, Passed), report.verdict
    assert report.hidden_sizes.startswith("fixed shape")
    assert "resized" not in report.distributions


def test_an_output_cache_keyed_on_input_contents_never_hits_while_timed(run_judge) -> None:
    """Entry 52 (the FlashInfer contest's hack): every timed call has fresh contents at a new address, so
    a cache keyed on a fingerprint of the inputs never answers a timed call."""
    fingerprinting = HONEST.replace(
        BODY,
        "key = hash(x.numpy().tobytes())\n"
        "        CALLS.append(key in CACHE)\n"
        "        if len(CALLS) == 14:\n"
        "            raise RuntimeError(f'HITS {sum(CALLS[3:])}')  # after the warm-up batches\n"
        "        CACHE.setdefault(key, (x * self.scale).clamp_min(0))\n"
        "        return CACHE[key]",
    ).replace("class ModelNew", "CACHE = {}\nCALLS = []\n\n\nclass ModelNew")
    one_call_per_batch = TimingPolicy(min_samples=5, max_samples=20, budget_s=5.0, window_ms=0)
    report = run_judge(fingerprinting, mode="profile", timing=one_call_per_batch)
    assert isinstance(report.verdict, Crashed), report.verdict
    assert "HITS 0" in report.verdict.message
