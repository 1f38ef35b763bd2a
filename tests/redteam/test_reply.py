"""A worker's reply, forged by candidate code in the worker (issue 24, item 5), on the GPU: every number
the judge would dereference is checked against what the driver mapped, never taken from the reply."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_mcp.results import ContractViolation
from tests.redteam.workspaces import forward, relu_session, verify

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

# Candidate code replaces the worker's `share` (it runs in the worker's process) so that every output
# it reports points elsewhere than the memory it exported: FIELDS is the forgery.
FORGE = """
import base64, os
import cuda_agent_mcp.worker.runner as _runner
_share = _runner.share
def _forged(tensor):
    ref = _share(tensor)
    p = ref.payload
    return ref.model_copy(update={{"payload": p.model_copy(update={fields})}})
_runner.share = _forged
"""


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        # the view moved just past the exported segment: the judge would read memory of its own there
        (
            '{"storage_offset_bytes": p.storage_offset_bytes + p.storage_size_bytes + (64 << 20)}',
            "reaches outside",
        ),
        # the storage claimed larger than the segment (the view's own bytes still inside it)
        ('{"storage_size_bytes": p.storage_size_bytes + (1 << 30)}', "reaches outside"),
        # a handle the driver refuses: a clean worker's outputs still map, so it is the candidate's
        ('{"handle": base64.b64encode(os.urandom(64)).decode()}', "refused to map"),
    ],
    ids=["offset past the segment", "storage larger than the segment", "a handle of random bytes"],
)
def test_an_output_reference_reaching_outside_what_the_worker_exported_is_a_contract_violation(
    tmp_path: Path, shared_build_cache: Path, fields: str, said: str
) -> None:
    model_new = forward("        return cuda_extension.relu(x)", prelude=FORGE.format(fields=fields))
    result = verify(relu_session(tmp_path / "forged", shared_build_cache, model_new=model_new))
    assert isinstance(result.verdict, ContractViolation), result.verdict
    assert result.verdict.check == "transport"
    assert said in result.verdict.message
    honest = verify(relu_session(tmp_path / "honest", shared_build_cache))
    assert honest.verdict.status == "passed", honest.verdict  # the judge that refused it is unharmed
