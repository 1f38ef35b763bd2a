"""Task loaders on real KernelBench files, on datasets built from them, and on every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cuda_agent_mcp.errors import TaskLoadError, TaskNotFound
from cuda_agent_mcp.tasks import (
    DatasetColumns,
    TaskCatalog,
    load_dataset,
    load_kernelbench,
    load_source,
    load_task_file,
)
from cuda_agent_mcp.tasks.model import content_hash

GOOD = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(4, 4)]

def get_init_inputs():
    return []
"""


def test_a_single_file_loads_with_its_hash_and_a_dtype_guess(kernelbench: Path) -> None:
    path = kernelbench / "level1" / "19_ReLU.py"
    task = load_task_file(path)
    assert task.id == "file/19_ReLU"
    assert task.source.kind == "file"
    assert task.content_hash == content_hash(path.read_text())
    assert task.policy.dtype == "float32"
    assert task.policy.tolerance.atol == 1e-2


def test_the_content_hash_ignores_line_ending_style() -> None:
    assert content_hash(GOOD) == content_hash(GOOD.replace("\n", "\r\n"))


def test_the_whole_kernelbench_tree_loads_with_stable_ids(kernelbench: Path) -> None:
    tasks = load_kernelbench(kernelbench)
    by_level = {level: [t for t in tasks if t.level == level] for level in (1, 2, 3)}
    assert [len(by_level[level]) for level in (1, 2, 3)] == [100, 100, 50]
    relu = next(t for t in tasks if t.id == "kernelbench/level1/19")
    assert relu.name == "ReLU"
    assert relu.source.path is not None and relu.source.path.endswith("level1/19_ReLU.py")
    assert len({t.id for t in tasks}) == 250


def _rows_from(kernelbench: Path, names: list[str]) -> list[dict[str, object]]:
    return [
        {
            "code": (kernelbench / "level1" / name).read_text(),
            "ops": [f"nn.{name.removesuffix('.py').split('_')[1]}"],
            "data_source": "torch#1",
        }
        for name in names
    ]


def test_a_jsonl_dataset_loads_one_task_per_row_with_its_tags(kernelbench: Path, tmp_path: Path) -> None:
    path = tmp_path / "ops.jsonl"
    rows = _rows_from(kernelbench, ["19_ReLU.py", "21_Sigmoid.py"])
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    tasks = load_dataset(path)
    assert [t.id for t in tasks] == ["ops/0", "ops/1"]
    assert tasks[1].name == "Sigmoid"
    assert tasks[1].tags == {"ops": '["nn.Sigmoid"]', "data_source": "torch#1"}
    assert tasks[0].source.row == 0


def test_a_parquet_dataset_loads_with_configurable_columns(kernelbench: Path, tmp_path: Path) -> None:
    rows = _rows_from(kernelbench, ["19_ReLU.py", "23_Softmax.py"])
    table = pa.table(
        {"program": [r["code"] for r in rows], "uid": ["a1", "b2"], "title": ["relu", "softmax"]}
    )
    path = tmp_path / "train.parquet"
    pq.write_table(table, path)
    tasks = load_dataset(path, columns=DatasetColumns(code="program", id="uid", name="title"), prefix="ops6k")
    assert [(t.id, t.name) for t in tasks] == [("ops6k/a1", "relu"), ("ops6k/b2", "softmax")]


@pytest.mark.parametrize(
    ("source", "problem", "line"),
    [
        ("def broken(:\n    pass\n", "syntax error", 1),
        ("", "the file is empty", None),
        (
            "import torch\n\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n",
            "no top-level `class Model",
            None,
        ),
        (GOOD.replace("def get_inputs", "def make_inputs"), "no top-level function get_inputs()", None),
        (
            GOOD.replace("def get_init_inputs", "def init_inputs"),
            "no top-level function get_init_inputs()",
            None,
        ),
        (GOOD.replace("def forward", "def run"), "class Model has no forward()", 5),
    ],
)
def test_a_malformed_file_is_refused_with_its_name_and_the_problem(
    tmp_path: Path, source: str, problem: str, line: int | None
) -> None:
    path = tmp_path / "task.py"
    path.write_text(source)
    with pytest.raises(TaskLoadError) as caught:
        load_task_file(path)
    assert caught.value.location == str(path)
    assert problem in caught.value.problem
    assert caught.value.line == line
    assert str(path) in str(caught.value)


def test_missing_unreadable_and_non_python_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TaskLoadError, match="no such file"):
        load_task_file(tmp_path / "absent.py")
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"\xff\xfe\x00class Model")
    with pytest.raises(TaskLoadError, match="not UTF-8"):
        load_task_file(binary)
    with pytest.raises(TaskLoadError, match=r"\.py file"):
        load_task_file(tmp_path / "task.txt")


def test_bad_dataset_rows_name_the_file_and_the_row(tmp_path: Path) -> None:
    bad_json = tmp_path / "a.jsonl"
    bad_json.write_text(json.dumps({"code": GOOD}) + "\n{not json\n")
    with pytest.raises(TaskLoadError) as caught:
        load_dataset(bad_json)
    assert caught.value.line == 2 and "invalid JSON" in caught.value.problem

    no_code = tmp_path / "b.jsonl"
    no_code.write_text(json.dumps({"source": GOOD}) + "\n")
    with pytest.raises(TaskLoadError, match=r"row 0.*no 'code' column"):
        load_dataset(no_code)

    bad_program = tmp_path / "c.jsonl"
    bad_program.write_text(json.dumps({"code": GOOD}) + "\n" + json.dumps({"code": "class Model(:"}) + "\n")
    with pytest.raises(TaskLoadError, match=r"c\.jsonl row 1.*syntax error"):
        load_dataset(bad_program)

    not_parquet = tmp_path / "d.parquet"
    not_parquet.write_text("hello")
    with pytest.raises(TaskLoadError, match="not a readable Parquet file"):
        load_dataset(not_parquet)

    csv = tmp_path / "e.csv"
    csv.write_text("code\n")
    with pytest.raises(TaskLoadError, match="unsupported dataset format"):
        load_dataset(csv)


def test_a_directory_that_holds_no_tasks_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskLoadError, match="holds no tasks"):
        load_source(tmp_path / "empty")
    with pytest.raises(TaskLoadError, match="no such file or directory"):
        load_source(tmp_path / "nowhere")


def test_the_catalog_finds_bundled_examples_and_configured_sources(kernelbench: Path) -> None:
    catalog = TaskCatalog([kernelbench])
    assert {"examples/relu", "examples/row_sum", "examples/bias_add_relu"} <= {t.id for t in catalog.list()}
    assert catalog.get("kernelbench/level2/1").level == 2
    assert [t.id for t in catalog.list(level=1, contains="relu")] == [
        "kernelbench/level1/19",
        "kernelbench/level1/20",
    ]
    with pytest.raises(TaskNotFound, match="kernelbench/level9/1"):
        catalog.get("kernelbench/level9/1")


def test_the_catalog_reads_sources_from_the_environment(
    kernelbench: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_AGENT_TASKS", str(kernelbench / "level3" / "1_MLP.py"))
    catalog = TaskCatalog.from_environment()
    assert catalog.get("file/1_MLP").name == "1_MLP"
