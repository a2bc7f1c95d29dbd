"""The scrub engine as the rules see it: a leaf module that breaks the import circle
scrub → scrub_rules → scrub_replacements → scrub (issue 30 item 1).

A replacement of the rule table (:func:`repeat_failure.rules.scrub_replacements.encoded_secret`)
scrubs a decoded word with the whole engine, whose table holds that very replacement.
:mod:`repeat_failure.rules.scrub` registers :func:`repeat_failure.rules.scrub.scrub` here when it
is imported (:func:`register`); the replacements call :func:`scrub_text`, so no module of the
rules imports one that imports it back.
"""

from __future__ import annotations

from collections.abc import Callable

_engine: Callable[[str], str] | None = None


def register(engine: Callable[[str], str]) -> None:
    """Make ``engine`` (``str`` → ``str``, the scrub of a whole text) what :func:`scrub_text`
    runs. Called once, by :mod:`repeat_failure.rules.scrub` as it loads."""
    global _engine
    _engine = engine


def scrub_text(text: str) -> str:
    """``text`` scrubbed by the registered engine (:func:`repeat_failure.rules.scrub.scrub`).

    Raises :class:`RuntimeError` when no engine is registered, i.e. a replacement ran without
    :mod:`repeat_failure.rules.scrub` imported (the rules run only from that engine)."""
    if _engine is None:
        raise RuntimeError("the scrub engine is not loaded: import repeat_failure.rules.scrub first")
    return _engine(text)
