"""The hand-written Produce response encoder against kio's, byte for byte."""

from __future__ import annotations

import pytest
from kio.index import load_response_schema

from broker.protocol.errors import ErrorCode
from broker.protocol.messages import build, encode_response
from broker.protocol.produce_response import encode_produce_response


def _body() -> dict:
    ok = {
        "index": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "base_offset": 1234,
        "log_append_time": -1,
        "log_start_offset": 17,
    }
    failed = {
        "index": 5,
        "error_code": ErrorCode.not_enough_replicas_after_append,
        "error_message": "the ISR shrank to [1], below min.insync.replicas=2 (caf\u00e9)",
        "base_offset": -1,
        "log_append_time": 1_700_000_000_123,
        "log_start_offset": -1,
    }
    bad_batch = {
        "index": 2,
        "error_code": ErrorCode.invalid_record,
        "error_message": "record 1 is bad",
        "record_errors": [
            {"batch_index": 1, "batch_index_error_message": "no key"},
            {"batch_index": 3, "batch_index_error_message": None},
        ],
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
    }
    return {
        "responses": [
            {"name": "orders", "partition_responses": [ok, failed]},
            {"name": "cl\u00e9s", "partition_responses": [bad_batch]},
            {"name": "empty", "partition_responses": []},
        ],
        "throttle_time": 250,
    }


@pytest.mark.parametrize("version", range(3, 10))
def test_produce_response_matches_kio(version):
    body = _body()
    if version < 8:  # record errors and messages exist from v8 on: kio would refuse them
        for topic in body["responses"]:
            for p in topic["partition_responses"]:
                p.pop("record_errors", None)
                p.pop("error_message", None)
    ours = encode_produce_response(version, 4242, body)
    theirs = encode_response(0, version, 4242, build(load_response_schema(0, version), body))
    assert ours == theirs


def test_produce_response_refuses_versions_it_does_not_encode():
    with pytest.raises(ValueError, match="Produce v10"):
        encode_produce_response(10, 1, {"responses": [], "throttle_time": 0})
