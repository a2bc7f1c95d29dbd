"""Terminal safety: no control or bidi character of a command reaches an output raw (issue 16).

A command may hold ESC sequences, BEL, NUL, C1 controls or Unicode bidi overrides (U+202E ...);
``curl /metrics`` or ``jq . /status`` in a terminal would act on them (colour, title, hidden
text, reordered text), and Prometheus' text format carries them in a label value as they are.
Every character ``str.isprintable()`` calls unprintable (Unicode categories Cc, Cf, Cs, Co, Cn,
Zl, Zp and the Zs spaces but U+0020) is written as the JSON escape of its code point instead,
``\\u001b`` (``\\U0001f3f4``-style code points above U+FFFF as a JSON surrogate pair): what
``/status`` and the JSON log already do for C0 controls, extended to the rest.

* :func:`label_value`: for a Prometheus label value (``/metrics``), where there is no escape to
  keep the value as it was: the six characters ``\\u001b`` stand for the ESC, visibly;
* :func:`json_text`: for JSON already serialised (``/status``, the log): raw unprintable
  characters only appear inside strings there, and an escape there keeps the parsed value
  exactly as it was.
"""

from __future__ import annotations


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def label_value(text: str) -> str:
    """``text`` with every unprintable character written as its ``\\uXXXX`` escape (six
    visible characters; twelve for a code point above U+FFFF). Returns ``text`` itself when it
    is all printable (the common case costs one C call). Never raises."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def json_text(text: str) -> str:
    """Serialised JSON ``text`` with every raw unprintable character (``json.dumps`` and
    ``orjson`` escape only C0 controls) written as its ``\\uXXXX`` escape: the same JSON value,
    safe to print. Returns ``text`` itself when it is all printable."""
    return label_value(text)


def json_bytes(data: bytes) -> bytes:
    """:func:`json_text` for UTF-8 JSON bytes (``orjson.dumps`` output). ASCII input (the common
    case) is returned as it is: its C0 controls are escaped already and DEL is the only
    unprintable ASCII character left."""
    if data.isascii() and b"\x7f" not in data:
        return data
    return json_text(data.decode("utf-8")).encode("utf-8")
