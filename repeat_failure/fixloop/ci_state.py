"""A pull request head's CI state, folded from its checks (rule 3 of
:mod:`repeat_failure.fixloop.sweep`): *pending* while any check is unfinished, *red* when every
check finished and one failed, *green* when every check passed, *no checks* when nothing ran.
Check names are scrubbed here, once, before they reach comments, kicks, logs or the ledger.
Pure functions of the checks given.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

from repeat_failure.fixloop.github import Check
from repeat_failure.rules.scrub import scrub

#: :attr:`CiState.state` values.
PENDING, RED, GREEN, NO_CHECKS = "pending", "red", "green", "no_checks"
#: Characters of a check name kept.
MAX_NAME = 100


@dataclass(frozen=True)
class CiState:
    """A PR head's CI as one pass saw it: ``state`` (pending, red, green, no_checks), the failing
    checks (``failing``, in name order), ``settled_at`` (epoch seconds the last check finished;
    ``None`` unless red or green)."""

    state: str
    failing: tuple[Check, ...] = ()
    settled_at: float | None = None
    red_at: float | None = None  # when the last failing check finished (re-runs restart it)
    #: While pending: the checks not finished (or without a verdict), in name order.
    waiting: tuple[Check, ...] = ()


def _name(raw: str) -> str:
    """A check's name as kept and shown: scrubbed, at most :data:`MAX_NAME` characters. A name
    that scrubbing or cutting changed gets a short digest of the raw name, so two different
    checks never merge into one (``token=abc`` and ``token=xyz`` both scrub alike)."""
    shown = scrub(raw)
    if shown == raw and len(raw) <= MAX_NAME:
        return raw
    digest = hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    return f"{shown[:MAX_NAME - 11]}… #{digest}"


def ci_state(checks: list[Check]) -> CiState:
    """Fold a head's checks into one :class:`CiState` (rule 3 of :mod:`repeat_failure.fixloop.sweep`)."""
    if not checks:
        return CiState(NO_CHECKS)
    # Check names reach comments, kicks, logs and the ledger: scrubbed once, here.
    checks = [dataclasses.replace(c, name=_name(c.name)) for c in checks]
    waiting = tuple(sorted((c for c in checks if c.status == PENDING), key=lambda c: c.name))
    if waiting:
        return CiState(PENDING, waiting=waiting)
    # Two suites may both have a check of one name (two workflows' ``build`` jobs): each is
    # its own check, and a name is listed once among the failing.
    failing = tuple({c.name: c for c in sorted((c for c in checks if c.status == RED),
                                               key=lambda c: c.name, reverse=True)}.values())
    failing = tuple(sorted(failing, key=lambda c: c.name))
    times = [c.completed_at for c in checks if c.completed_at is not None]
    settled = max(times) if times else None
    red_times = [c.completed_at for c in failing if c.completed_at is not None]
    return CiState(RED if failing else GREEN, failing, settled,
                   max(red_times) if red_times else None)
