"""The seed-operator registry and the programmatic composer: determinism, well-formed KernelBench programs,
the paper's operator-count distribution, family coverage, and real CPU runs that prove the shape rules."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from statistics import median
from typing import Any

import pytest

from cuda_agent_mcp.synth.compose import PAPER_OP_COUNT_WEIGHTS, compose_programmatic
from cuda_agent_mcp.synth.ops import FAMILIES, SEED_OPS, SeedOp, seed_op
from cuda_agent_mcp.synth.shapes import Program, Step
from cuda_agent_mcp.tasks.static_check import check_reference_source, guess_dtype

SEED = 20240607
FAMILY_OF = {op.name: op.family for op in SEED_OPS}


def _families(ops: tuple[str, ...]) -> set[str]:
    return {FAMILY_OF[name] for name in ops}


def test_the_registry_holds_at_least_fifty_uniquely_named_operators_of_every_family() -> None:
    names = [op.name for op in SEED_OPS]
    assert len(names) >= 50
    assert len(set(names)) == len(names)
    assert {op.family for op in SEED_OPS} == set(FAMILIES)
    assert all(seed_op(name).name == name for name in names)


def test_an_unknown_operator_name_is_a_value_error_that_names_it() -> None:
    with pytest.raises(ValueError, match=r"nn\.Dropout"):
        seed_op("nn.Dropout")


def test_convolutions_are_conv_class_and_linear_layers_gemm_class_in_the_candidate_too() -> None:
    assert seed_op("nn.Conv2d").vendor_class == "conv"
    assert seed_op("nn.ConvTranspose3d").vendor_class == "conv"
    assert seed_op("nn.Linear").vendor_class == "gemm"
    assert seed_op("torch.relu").vendor_class == "other"
    registry = [seed_op("nn.Conv2d"), seed_op("nn.Linear")]
    seen: dict[str, str] = {}
    for index in range(20):
        candidate = compose_programmatic(SEED, index, registry=registry, count_weights={2: 1.0})
        seen.update(zip(candidate.ops, candidate.vendor_classes, strict=True))
    assert seen == {"nn.Conv2d": "conv", "nn.Linear": "gemm"}


def test_the_same_seed_and_index_give_the_same_program_and_other_indices_mostly_others() -> None:
    first = [compose_programmatic(SEED, i) for i in range(40)]
    again = [compose_programmatic(SEED, i) for i in range(40)]
    assert first == again
    assert len({c.code for c in first}) >= 38
    other_seed = [compose_programmatic(SEED + 1, i).code for i in range(40)]
    assert sum(a.code != b for a, b in zip(first, other_seed, strict=True)) >= 38


def test_a_fresh_process_with_another_hash_seed_composes_the_same_programs() -> None:
    script = (
        "from cuda_agent_mcp.synth.compose import compose_programmatic as c\n"
        f"print('\\n'.join(c({SEED}, i, dtype='bfloat16').model_dump_json() for i in range(8)))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    here = [compose_programmatic(SEED, i, dtype="bfloat16").model_dump_json() for i in range(8)]
    assert out.stdout.split("\n")[:8] == here


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_composed_programs_are_well_formed_kernelbench_reference_programs(dtype: Any) -> None:
    for index in range(100):
        candidate = compose_programmatic(SEED, index, dtype=dtype)
        tree = check_reference_source(candidate.code, "x")
        assert guess_dtype(tree) == dtype
        assert candidate.composer == "programmatic" and (candidate.seed, candidate.index) == (SEED, index)
        assert len(candidate.ops) == len(candidate.vendor_classes) >= 1
        assert all(f"\n{name} = " in candidate.code for name in candidate.cpu_sizes)
        forward = candidate.code.split("def forward")[1].split("return x")[0]
        assert not any(word in forward for word in ("dropout", "rand", "bernoulli", "multinomial"))
        assert forward.count("\n        x = ") == len(candidate.ops)


def test_the_operator_count_follows_the_paper_distribution_and_respects_max_ops() -> None:
    counts = Counter(len(compose_programmatic(SEED, i).ops) for i in range(2000))
    for n, weight in PAPER_OP_COUNT_WEIGHTS.items():
        assert abs(counts[n] / 2000 - weight) < 0.025, (n, counts)
    capped = Counter(len(compose_programmatic(SEED, i, max_ops=2).ops) for i in range(300))
    assert set(capped) <= {1, 2} and capped[1] < capped[2]
    with pytest.raises(ValueError):
        compose_programmatic(SEED, 0, max_ops=0)


def test_every_family_appears_and_losses_only_end_a_chain() -> None:
    seen: set[str] = set()
    for index in range(600):
        ops = compose_programmatic(SEED, index, count_weights={2: 1, 3: 1, 4: 1}).ops
        seen |= _families(ops)
        assert all(FAMILY_OF[name] != "loss" for name in ops[:-1])
    assert seen == set(FAMILIES)


def test_estimates_spread_over_the_runtime_window() -> None:
    estimates = [compose_programmatic(SEED, i).estimate_ms or 0.0 for i in range(300)]
    inside = [e for e in estimates if 1.0 <= e <= 100.0]
    assert len(inside) >= 0.9 * len(estimates)
    assert 3.0 <= median(estimates) <= 30.0
    # log-uniform-ish: both halves of the 3-30 ms window hold a fair share
    assert sum(3.0 <= e < math.sqrt(90.0) for e in estimates) >= 60
    assert sum(math.sqrt(90.0) <= e <= 30.0 for e in estimates) >= 60


def _cover_all_families(count: int) -> list[int]:
    """Indices of `count` compositions that together use every family (deterministic, greedy)."""
    chosen: list[int] = []
    covered: set[str] = set()
    index = 0
    while len(covered) < len(FAMILIES) and index < 2000:
        new = _families(compose_programmatic(SEED, index, count_weights={2: 1, 3: 1}).ops) - covered
        if new:
            chosen.append(index)
            covered |= new
        index += 1
    assert covered == set(FAMILIES)
    extra = [i for i in range(index, index + 10 * count) if i % 7 == 0]
    return (chosen + extra)[:count]


def test_a_sample_of_composed_programs_runs_on_the_cpu_at_its_cpu_sizes_with_a_finite_output() -> None:
    torch = pytest.importorskip("torch")
    for index in _cover_all_families(25):
        candidate = compose_programmatic(SEED, index, count_weights={2: 1, 3: 1})
        namespace: dict[str, Any] = {"__name__": f"composed_{index}"}
        exec(compile(candidate.code, f"<composed {index}>", "exec"), namespace)
        namespace.update(candidate.cpu_sizes)
        torch.manual_seed(0)
        model = namespace["Model"](*namespace["get_init_inputs"]())
        with torch.no_grad():
            out = model(*namespace["get_inputs"]())
        assert isinstance(out, torch.Tensor), candidate.ops
        assert bool(torch.isfinite(out).all()), (candidate.ops, candidate.code)


def _wrong_flatten(p: Program) -> Step:
    # Wrong on purpose: flatten makes a vector, but the rule claims the shape is unchanged.
    return Step(forward="x = torch.flatten(x)", out=p.x, flops=p.x.numel)


def test_an_injected_operator_with_wrong_shape_rules_composes_without_raising() -> None:
    wrong = SeedOp("torch.flatten", "elementwise", "other", frozenset({2, 3, 4}), _wrong_flatten)
    registry = [seed_op("nn.Linear"), seed_op("nn.LayerNorm"), wrong]
    used = 0
    for index in range(30):
        candidate = compose_programmatic(SEED, index, registry=registry, count_weights={3: 1.0})
        check_reference_source(candidate.code, "x")
        used += "torch.flatten" in candidate.ops
    assert used > 0
    # An operator whose emit refuses everything leaves a registry that still composes what it can.
    never = replace(wrong, name="never", emit=lambda p: None)
    assert compose_programmatic(
        SEED, 0, registry=[seed_op("torch.relu"), never], count_weights={2: 1.0}
    ).ops == (
        "torch.relu",
        "torch.relu",
    )
