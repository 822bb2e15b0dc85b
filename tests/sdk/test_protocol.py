"""Wire models and framing (spec 06 §4, §5): exact messages in order, encoding, line splitting."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from pydsh.kernel.errors import KernelError
from pydsh.kernel.plugin import resolve_plugin, validate_config
from pydsh.wire.framing import MAX_DEPTH, FrameError, LineSplitter, decode_line, encode_frame, parse_frame
from pydsh.wire.protocol import (
    InitializeParams,
    PromptParams,
    ResumeParams,
    SetWorkingDirectoryParams,
    WaitParams,
    WireError,
    WorkingDirectoryParams,
    echo_id,
    is_request_id,
    safe_positive_int,
)
from pydsh.wire.results import InitializeResult, PromptResult, WorkingDirectoryResult

BASE = {"cwd": "/ws", "provider": "deepseek-official", "model": "deepseek-v4-flash"}


def refused(model: Any, params: dict[str, Any]) -> str:
    with pytest.raises(WireError) as caught:
        model.model_validate(params)
    return str(caught.value)


def test_frames_are_compact_utf8_with_js_surrogate_escapes() -> None:
    assert encode_frame({"a": "é", "b": [1, 2]}) == '{"a":"é","b":[1,2]}\n'.encode()
    assert encode_frame({"t": "x\ud800y"}) == b'{"t":"x\\ud800y"}\n'
    assert encode_frame({"t": "\udfff\ud83d\ude00"}) == '{"t":"\\udfff😀"}\n'.encode()
    with pytest.raises(ValueError):
        encode_frame({"n": float("nan")})


def test_inbound_lines() -> None:
    assert decode_line(b'  {"a":1}\r') == {"a": 1}
    assert decode_line(b"   ") is None
    assert decode_line(b"{oops") is None
    assert decode_line(b'{"n": NaN}') is None
    assert decode_line(b"[1,2]") == [1, 2]
    assert decode_line(b'"\xff"') == "\ufffd"


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 200_000])
def test_a_frame_nested_too_deep_is_refused_not_fatal(depth: int) -> None:
    """However deep a peer nests a frame, parsing refuses it with one message (no RecursionError)."""
    line = b"[" * depth + b"]" * depth
    with pytest.raises(FrameError, match=f"nests deeper than {MAX_DEPTH} levels"):
        parse_frame(line)
    assert decode_line(line) is None
    deep_object = b'{"a":' * depth + b"1" + b"}" * depth
    assert decode_line(deep_object) is None


def test_a_frame_at_the_depth_bound_parses() -> None:
    line = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert parse_frame(line) is not None
    with pytest.raises(FrameError, match="not valid JSON"):
        parse_frame(b"{oops")


def test_ids() -> None:
    assert [is_request_id(v) for v in ("a", 7, 7.5, True, None, [1], {})] == [True, True, True] + [False] * 4
    assert echo_id(7.0) == 7 and type(echo_id(7.0)) is int
    assert echo_id(7.5) == 7.5 and echo_id("7") == "7"
    assert echo_id(float("inf")) is None and echo_id(float("-inf")) is None and echo_id(float("nan")) is None
    assert echo_id(10**400) == 10**400


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1),
        (8.0, 8),
        (2**53 - 1, 2**53 - 1),
        (0, None),
        (-1, None),
        (1.5, None),
        (True, None),
        ("8", None),
        (2**53, None),
        (None, None),
    ],
)
def test_safe_positive_int(value: object, expected: int | None) -> None:
    assert safe_positive_int(value) == expected


def test_line_splitter_joins_chunks_and_drops_overlong_lines() -> None:
    overflows: list[int] = []
    splitter = LineSplitter(overflows.append, limit=5)
    assert splitter.feed(b"ab") == []
    assert splitter.feed(b"c\nde\n") == [b"abc", b"de"]
    assert splitter.feed(b"123456") == []
    assert splitter.feed(b"789\nok\n") == [b"ok"]
    assert overflows == [5]
    assert splitter.feed(b"1234\n12345\n123456\nlast") == [b"1234", b"12345"]
    assert overflows == [5, 5]
    assert splitter.finish() == [b"last"]
    assert splitter.finish() == []


def test_initialize_params_order_and_normalisation() -> None:
    params = InitializeParams.model_validate({**BASE, "maxTokens": 8.0, "pydshExtensions": {"deltas": True}})
    assert (params.maxTokens, params.deltas, params.reasoningEffort) == (8, True, None)
    assert not InitializeParams.model_validate({**BASE, "pydshExtensions": {"deltas": 1}}).deltas
    assert not InitializeParams.model_validate({**BASE, "pydshExtensions": "yes", "unknown": 1}).deltas
    effort = "initialize reasoningEffort must be a non-empty string"
    max_tokens = "initialize maxTokens must be a positive safe integer"
    assert refused(InitializeParams, {"reasoningEffort": None, "maxTokens": 0}) == effort
    assert refused(InitializeParams, {"maxTokens": True, "cwd": 1}) == max_tokens
    assert refused(InitializeParams, {"maxTokens": None}) == max_tokens
    assert refused(InitializeParams, {"provider": ""}) == "initialize cwd must be a string"
    assert refused(InitializeParams, {"cwd": "", "model": ""}) == "initialize provider must be a non-empty string"
    assert refused(InitializeParams, {"cwd": "", "provider": "p"}) == "initialize model must be a non-empty string"


def test_prompt_params() -> None:
    image = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
    params = PromptParams.model_validate({"sessionId": "s", "contentBlocks": [{"type": "text", "text": ""}, image]})
    assert params.has_inline_image
    stored = PromptParams.model_validate({"sessionId": "s", "contentBlocks": [{"type": "image", "attachment": {}}]})
    assert not stored.has_inline_image
    session = "session/prompt requires a non-empty sessionId string"
    blocks = "session/prompt requires a non-empty contentBlocks array"
    assert refused(PromptParams, {"sessionId": 1, "contentBlocks": "x"}) == session
    assert refused(PromptParams, {"sessionId": "s", "contentBlocks": {}}) == blocks
    assert refused(PromptParams, {"sessionId": "s", "contentBlocks": [{"type": "text", "text": 1}]}) == (
        "session/prompt content block 0 is invalid"
    )


def test_session_params() -> None:
    assert refused(ResumeParams, {"sessionId": ""}) == "session/resume requires a non-empty sessionId string"
    assert WaitParams.model_validate({"sessionId": ""}).sessionId == ""
    assert refused(WaitParams, {}) == "session/wait requires a sessionId string"
    directory = "working-directory requests require a non-empty sessionId"
    assert refused(WorkingDirectoryParams, {"sessionId": ""}) == directory
    assert refused(SetWorkingDirectoryParams, {"path": 1}) == directory
    assert (
        refused(SetWorkingDirectoryParams, {"sessionId": "s", "path": 1})
        == "working-directory set requires a path string"
    )


def test_result_models() -> None:
    result = InitializeResult.model_validate(json.loads('{"serverInfo":{"name":"n","version":"v"},"other":1}'))
    assert result.serverInfo is not None and result.serverInfo.name == "n" and result.pydsh is None
    assert PromptResult.model_validate({"messageId": "m"}).messageId == "m"
    with pytest.raises(ValidationError):
        PromptResult.model_validate({"messageId": 5})
    with pytest.raises(ValidationError):
        WorkingDirectoryResult.model_validate({})


@pytest.mark.parametrize(("raw", "expected"), [("true", True), ("FALSE", False), ("True", True), (False, False)])
def test_max_tokens_as_success_accepts_booleans(raw: object, expected: bool) -> None:
    info = resolve_plugin("sdk-server")
    assert validate_config("sdk-server", info, {"maxTokensAsSuccess": raw}).maxTokensAsSuccess is expected
    assert validate_config("sdk-server", info, None).maxTokensAsSuccess is False


@pytest.mark.parametrize("raw", ["yes", "1", "", 1, None])
def test_max_tokens_as_success_rejects_anything_else(raw: object) -> None:
    with pytest.raises(KernelError, match="CONFIG_INVALID"):
        validate_config("sdk-server", resolve_plugin("sdk-server"), {"maxTokensAsSuccess": raw})
