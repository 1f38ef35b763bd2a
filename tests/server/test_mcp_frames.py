"""The checks behind the transports' answers, in process: which frames are refused with which code, and
how an argument error reads when many fields are wrong or a value is long."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from cuda_agent_mcp.server.arguments import MAX_FIELDS, readable
from cuda_agent_mcp.server.frames import INVALID_REQUEST, PARSE_ERROR, check_frame


@pytest.mark.parametrize(
    "frame",
    [
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
        '{"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {}}',
        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        b'{"jsonrpc": "2.0", "id": 7, "result": {}}',
        b'{"jsonrpc": "2.0", "id": 7, "error": {"code": -1, "message": "no"}}',
    ],
)
def test_well_formed_messages_pass(frame: str | bytes) -> None:
    assert check_frame(frame) is None


@pytest.mark.parametrize(
    ("frame", "code", "reply_id"),
    [
        (b"", PARSE_ERROR, None),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', PARSE_ERROR, None),
        (b'"just a string"', INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": "x"}', INVALID_REQUEST, 9),
        (b'{"jsonrpc": "2.0", "id": 9, "error": "no"}', INVALID_REQUEST, None),  # a response: id not echoed
    ],
)
def test_bad_frames_are_refused_with_the_specs_code(frame: bytes, code: int, reply_id: Any) -> None:
    bad = check_frame(frame)
    assert bad is not None and bad.code == code
    assert bad.reply() == {"jsonrpc": "2.0", "id": reply_id, "error": {"code": code, "message": bad.message}}
    assert "\n" not in bad.message and len(bad.message) < 200


class _Arguments(BaseModel):
    text: str
    a: int
    b: int
    c: int
    d: int
    e: int
    f: int
    g: int


def test_an_argument_error_names_at_most_a_few_fields_and_cuts_long_values() -> None:
    with pytest.raises(ValidationError) as caught:
        _Arguments.model_validate({"text": {"content": "x" * 10_000}})
    line = readable("write_file", caught.value)
    assert line.startswith('invalid arguments for write_file: text: expected a string (got {"content": "xxx')
    assert "; a: required; b: required;" in line
    assert line.endswith(f"; and {8 - MAX_FIELDS} more") and "\n" not in line
    assert len(line) < 300  # the 10 000 characters are not repeated
