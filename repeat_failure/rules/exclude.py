"""Exclude: commands that fail by design while waiting never count (spec C9).

An entry matches a normalized command equal to it or starting with it plus a space, so
``gh pr checks`` matches ``gh pr checks 123 --watch`` but not ``gh pr checksum``. The configured
list replaces the default list (``gh pr checks``, ``gh run watch``).
"""

from __future__ import annotations

from collections.abc import Iterable


class Exclusions:
    """A fixed list of exclusion prefixes (whitespace already collapsed, as in normalized text)."""

    def __init__(self, entries: Iterable[str]) -> None:
        self._entries = tuple(" ".join(e.split()) for e in entries if e.strip())
        # The two tests of matches(), each done by one C call over all entries.
        self._exact = frozenset(self._entries)
        self._prefixes = tuple(e + " " for e in self._entries)

    @property
    def entries(self) -> tuple[str, ...]:
        """The entries, in configuration order."""
        return self._entries

    def matches(self, command: str) -> bool:
        """True when the normalized ``command`` is excluded."""
        return command in self._exact or command.startswith(self._prefixes)
