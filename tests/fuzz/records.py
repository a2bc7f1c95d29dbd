"""atheris fuzz target: the bytes of one record line, or of one session-log line, as the
sidecar reads them (issue 6: "a fuzz target for the record parser and the normalizer").

For each input: ``parse_line`` must return a Record or raise RecordError; a Record's command
then goes through ``scrub`` and ``normalize`` (which must not raise); the same bytes, decoded
as JSON, go to every JSON Lines session reader, which must return events or raise
ReaderFormatError. Any other exception is a crash the fuzzer reports with its input.

Run: ``python tests/fuzz/records.py -max_total_time=60 -rss_limit_mb=512`` (libFuzzer flags);
``tests/test_fuzz.py`` runs it for a short fixed time in CI.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    import orjson

    from repeat_failure.backends import ReaderFormatError, session_reader
    from repeat_failure.backends.coverage import COVERAGE
    from repeat_failure.rules.normalize import normalize
    from repeat_failure.rules.parse import RecordError, parse_line
    from repeat_failure.rules.scrub import scrub

NOW = 1_800_000_000.0
READERS = [r for b in sorted(COVERAGE) if (r := session_reader(b)) is not None
           and r.kind == "jsonl"]


def one_input(data: bytes) -> None:
    """Feed ``data`` to the parser, the scrubber, the normalizer and every reader."""
    try:
        record = parse_line(data, "a1", "claude", NOW)
    except RecordError:
        record = None
    if record is not None:
        normalize(scrub(record.cmd, cut=record.cut), record.backend, NOW)
    text = data.decode("utf-8", "replace")
    normalize(scrub(text), "codex", NOW)
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return
    for reader in READERS:
        try:
            reader.parse_line(obj, reader.new_file_state())
        except ReaderFormatError:
            pass


def main() -> None:
    """libFuzzer entry point."""
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
