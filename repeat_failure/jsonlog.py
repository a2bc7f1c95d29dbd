"""The log format every ``repeat-failure`` program writes: one JSON object per line on stderr,
from the ``repeat_failure`` logger (:func:`configure_logging`)."""

from __future__ import annotations

import json
import logging
import sys

from repeat_failure.rules.terminal import json_text

log = logging.getLogger("repeat_failure")


class JsonFormatter(logging.Formatter):
    """One JSON object per log line: ts, level, msg and the record's ``extra`` fields.

    Everything passed in ``extra`` is already scrubbed by the pipeline; the formatter adds
    nothing raw, and writes every unprintable character (a control or bidi character of a
    command) as its JSON escape (:func:`repeat_failure.rules.terminal.json_text`)."""

    _STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        data = {"ts": round(record.created, 6), "level": record.levelname.lower(),
                "msg": record.getMessage()}
        for key, value in vars(record).items():
            if key not in self._STANDARD:
                data[key] = value
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json_text(json.dumps(data, ensure_ascii=False, default=str))


def configure_logging(stream=None) -> None:
    """Send the ``repeat_failure`` logger's records to ``stream`` (default stderr) as JSON lines."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False
