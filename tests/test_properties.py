"""Property-based tests (hypothesis): whatever bytes or JSON a record line or a session log
holds, the parser, the scrubber, the normalizer and every session reader answer with a result or
their own error type, never another exception; and scrubbing and normalizing are idempotent
(what they produce is already in their output form)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repeat_failure.backends import EVENT_KINDS, ReaderFormatError, SessionEvent, session_reader
from repeat_failure.backends.coverage import COVERAGE
from repeat_failure.rules.normalize import normalize
from repeat_failure.rules.parse import MAX_CLOCK_SKEW_S, MAX_LINE_BYTES, REASONS, Record, RecordError, parse_line
from repeat_failure.rules.scrub import scrub

NOW = 1_800_000_000.0
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=5),
    max_leaves=25)

record_fields = st.fixed_dictionaries(
    {},
    optional={
        "v": st.one_of(st.just(1), json_values),
        "ts": st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                        st.integers(min_value=-2**70, max_value=2**70), json_values),
        "agent": st.one_of(st.just("a1"), json_values),
        "backend": st.one_of(st.just("bash"), json_values),
        "route": st.one_of(st.just("bash_env"), json_values),
        "exit": st.one_of(st.integers(min_value=-2**40, max_value=2**40), st.none(), json_values),
        "failed": st.one_of(st.booleans(), json_values),
        "cut": st.one_of(st.booleans(), json_values),
        "cmd": st.one_of(st.text(), json_values),
    })


def check_record(line: bytes) -> None:
    try:
        record = parse_line(line, "a1", "bash", NOW)
    except RecordError as exc:
        assert exc.reason in REASONS
        return
    assert isinstance(record, Record)
    assert math.isfinite(record.ts) and 0 <= record.ts <= NOW + MAX_CLOCK_SKEW_S
    assert record.exit is None or 0 <= record.exit <= 255
    assert record.failed is (record.exit != 0) or record.exit is None
    assert isinstance(record.cmd, str) and len(line) < MAX_LINE_BYTES


@SETTINGS
@given(st.binary(max_size=600))
def test_parser_on_random_bytes(line: bytes) -> None:
    check_record(line)


@SETTINGS
@given(record_fields)
def test_parser_on_records_with_wrong_fields(fields: dict) -> None:
    """Wrong types, NaN and infinite times, huge or negative exits, missing fields."""
    check_record(json.dumps(fields, allow_nan=True).encode())


@SETTINGS
@given(st.integers(min_value=1, max_value=3000))
def test_parser_on_deep_json(depth: int) -> None:
    check_record(b'{"cmd":' + b"[" * depth + b"]" * depth + b"}")


@SETTINGS
@given(st.text(max_size=400), st.sampled_from(sorted(COVERAGE)))
def test_scrub_and_normalize_never_raise_and_are_idempotent(text: str, backend: str) -> None:
    once = scrub(text)
    assert scrub(once) == once
    command = normalize(once, backend, NOW)
    assert normalize(command, "bash", NOW) == command


@pytest.mark.parametrize("backend", sorted(b for b in COVERAGE
                                           if (r := session_reader(b)) is not None
                                           and r.kind == "jsonl"))
def test_readers_on_random_json(backend: str) -> None:
    """Any decoded JSON value: the reader gives well-formed events or ReaderFormatError, also
    with the state earlier random lines left behind."""
    reader = session_reader(backend)
    state = reader.new_file_state()

    @SETTINGS
    @given(json_values)
    def check(value) -> None:
        try:
            events = reader.parse_line(value, state)
        except ReaderFormatError as exc:
            assert exc.reason and "\n" not in exc.reason
            return
        assert isinstance(events, list)
        for event in events:
            assert isinstance(event, SessionEvent) and event.kind in EVENT_KINDS
            assert event.exit is None or isinstance(event.exit, int)

    check()
