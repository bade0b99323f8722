"""Property-based fuzzing of the shard service's requests: every method's fields replaced, dropped or joined by
arbitrary JSON, in process, over gRPC (raw bytes with the right token) and over the report line. A malformed
request is refused with INVALID_ARGUMENT naming the field (or with the book's own refusal where the request is
well formed), the book is unchanged by anything refused, and the service answers the next call."""

import json
import socket

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastimator.elastic import report_line_codec as codec
from elastimator.elastic.service import METHODS, SERVICE, TOKEN_HEADER, ShardServer, ShardService
from elastimator.elastic.shards import ShardServiceError

TOKEN = "fuzz-token"
DATASET = {"name": "train", "size": 100, "shard_size": 10}

VALID = {
    "add_dataset": {"dataset": {"name": "other", "size": 10, "shard_size": 5}},
    "request": {"dataset": "train", "worker": "w1", "request_id": "r1"},
    "report": {"dataset": "train", "worker": "w0", "shard_id": 0, "consumed": 1, "lease": 0, "offset": 0},
    "bad_records": {"dataset": "train", "records": [["f.csv:1", "not a number"]], "limit": 5},
    "release": {"dataset": "train", "worker": "w0", "shard_id": 0, "lease": 0},
    "heartbeat": {"worker": "w0"},
    "leave": {"worker": "w9"},
    "fail_worker": {"failed_worker": "w9"},
    "seal": {"worker": "chief-0", "checkpoint_step": 10},
    "commit": {"checkpoint_step": 10, "seal_id": 0},
    "restore": {"checkpoint_step": 0},
    "status": {"dataset": "train"},
    "open": {},
    "unheard": {"worker": "w0"},
}
assert set(VALID) == set(METHODS)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)


@st.composite
def malformed(draw):
    """(method, request): a valid request of a method with one field replaced, dropped, or a field added."""
    method = draw(st.sampled_from(sorted(METHODS)))
    request = json.loads(json.dumps(VALID[method]))
    fields = sorted(request) + (sorted(f"dataset.{k}" for k in request["dataset"]) if method == "add_dataset" else [])
    action = draw(st.sampled_from(["replace", "drop", "add"] if fields else ["add"]))
    if action == "add":
        request[draw(st.sampled_from(["worker", "offset", "extra", "lease", "dataset"]))] = draw(json_values)
        return method, request
    field = draw(st.sampled_from(fields))
    owner, key = (request["dataset"], field[len("dataset."):]) if field.startswith("dataset.") else (request, field)
    if action == "drop":
        del owner[key]
    else:
        owner[key] = draw(json_values)
    return method, request


def _fresh_service() -> ShardService:
    service = ShardService(TOKEN)
    service.handle("add_dataset", {"dataset": dict(DATASET)})
    service.handle("open", {})
    service.handle("request", {"dataset": "train", "worker": "w0"})  # w0 holds shard 0, lease 0
    return service


def _book(service):
    return json.dumps(service.book.to_dict(), sort_keys=True, default=str)


REFUSALS = {"INVALID_ARGUMENT", "FAILED_PRECONDITION", "NOT_FOUND", "ABORTED"}
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(malformed())
def test_in_process_a_malformed_request_is_refused_by_field_and_changes_nothing(case):
    method, request = case
    service = _fresh_service()
    before = _book(service)
    try:
        service.handle(method, request)
    except ShardServiceError as e:
        assert e.status in REFUSALS, (method, request, e)
        if e.status == "INVALID_ARGUMENT":
            assert "field '" in str(e) or "unknown method" in str(e), (method, request, e)
        assert _book(service) == before, (method, request, e)
    assert "trained_records" in service.handle("status", {"dataset": "train"})  # still answers


@pytest.fixture(scope="module")
def server():
    service = _fresh_service()
    server = ShardServer(service, report_port=0).start()
    yield server
    server.stop()


@FUZZ
@given(malformed())
def test_over_grpc_a_malformed_request_gets_a_status_not_an_internal_error(server, case):
    method, request = case
    channel = grpc.insecure_channel(server.address)
    try:
        call = channel.unary_unary(f"/{SERVICE}/{method}")
        before = _book(server.service) if method not in ("restore", "commit", "seal", "open") else None
        try:
            call(json.dumps(request).encode(), metadata=((TOKEN_HEADER, TOKEN),), timeout=10)
        except grpc.RpcError as e:
            assert e.code().name in REFUSALS, (method, request, e.code(), e.details())
            if e.code() == grpc.StatusCode.INVALID_ARGUMENT and before is not None:
                assert _book(server.service) == before, (method, request, e.details())
        answer = channel.unary_unary(f"/{SERVICE}/status")(json.dumps({"dataset": "train"}).encode(),
                                                           metadata=((TOKEN_HEADER, TOKEN),), timeout=10)
        assert "trained_records" in json.loads(answer)  # the service still answers
    finally:
        channel.close()


def test_a_request_nested_a_million_deep_is_invalid_not_a_crash(server):
    channel = grpc.insecure_channel(server.address)
    try:
        with pytest.raises(grpc.RpcError) as raised:
            channel.unary_unary(f"/{SERVICE}/report")(b"[" * 1_000_000 + b"]" * 1_000_000,
                                                      metadata=((TOKEN_HEADER, TOKEN),), timeout=30)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        channel.close()


@pytest.mark.parametrize("request_, field", [
    ({"dataset": {"size": 10, "shard_size": 5}}, "dataset"),
    ({"dataset": dict(DATASET, name="x"), "worker": ["w"]}, "worker"),
])
def test_the_issues_cases_name_their_field(request_, field):
    service = _fresh_service()
    with pytest.raises(ShardServiceError, match=f"field '{field}'") as raised:
        service.handle("add_dataset", request_)
    assert raised.value.status == "INVALID_ARGUMENT"


def test_a_negative_offset_is_not_already_counted():
    service = _fresh_service()
    before = _book(service)
    with pytest.raises(ShardServiceError, match="field 'offset' must be an int >= 0") as raised:
        service.handle("report", dict(VALID["report"], offset=-5))
    assert raised.value.status == "INVALID_ARGUMENT" and _book(service) == before


@FUZZ
@given(malformed())
def test_over_the_report_line_a_malformed_call_gets_an_error_frame(server, case):
    method, request = case
    if method not in codec.LINE_METHODS:
        method = "report"
    line_port = server.report_line.port
    with socket.create_connection(("127.0.0.1", line_port), timeout=10) as connection:
        stream = connection.makefile("rb")
        codec.send_frame(connection, {"token": TOKEN, "worker": "fuzzer"})
        assert "methods" in codec.read_frame(stream)
        codec.send_frame(connection, {"method": method, **request})
        reply = codec.read_frame(stream)
        if "error" in reply:
            assert reply["error"].split(":")[0] in REFUSALS, (method, request, reply)
        codec.send_frame(connection, {"method": "request", "dataset": "train", "worker": "fuzzer",
                                      "request_id": "again"})
        assert "error" not in codec.read_frame(stream)  # the line still answers
