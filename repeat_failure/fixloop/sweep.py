"""One sweep of the open pull requests: each PR's CI state, and the escalation ladder.

Every rule is design adr-0010's (the seed ``adr-0010-ci-fix-loop-escalation.txt``); the ladder
for people is docs/fixloop.md. Per pass (:meth:`Sweeper.run_once`):

1. List the open PRs of every configured repository. A repository whose listing fails is left
   alone this pass (its entries are neither updated nor pruned).
2. Skip dependency bots (``renovate[bot]``, ``dependabot[bot]``, ``mergeraptor[bot]``,
   configurable): their red PRs are not fix loops; with ``authors`` given, only those logins'
   PRs are (the agents': a person's red PR is not a fix loop either).
   Draft PRs are skipped too unless ``include_drafts`` (their ledger entry, if any, is kept as it
   is; their checks still count towards shared breakage).
3. Read each PR's checks (check runs, check suites and commit statuses of its head,
   :meth:`repeat_failure.fixloop.github.GitHub.checks`). CI is *pending* while any check is unfinished
   (or the fetch failed): the pass cannot conclude, and the ledger is left as it was (only the
   label bookkeeping below is applied); a head pending longer than ``inconclusive_after_s`` is
   reported once (``fixloop_inconclusive``) and exported (``inconclusive_seconds``). *Green*:
   every check passed (a conclusive green). *Red*: every check finished and one failed; the time the last one finished is when CI
   *settled*.
4. Shared breakage: a check red on the PR and on at least ``shared_breakage_prs`` other open PRs
   of the repository in the same pass is an incident (a broken base, a runner outage). A PR
   whose every failing check is such an incident learns nothing this pass: no attempt counted,
   no staleness clock, no re-engagement.
5. The label is authoritative, the ledger a cache: a PR wearing the label is escalated even to
   an empty ledger (no second comment); once a listing has shown the label on an escalated PR
   (*confirmed*; GitHub's 200 to adding it is not enough, issue 31), its absence means a human
   removed it: the PR is un-parked with a fresh budget, and the head it had then is stamped as
   the reviewer's pass. A label no listing has shown yet is added again.
6. A conclusive green clears the PR's history; an escalated PR going green is un-parked (label
   removed, ledger reset, a comment saying why), whoever put the label on, and its head is
   stamped as the reviewer's pass (a repair). An escalated PR whose escalated checks later
   turn out to be shared breakage is un-parked the same way when that breakage clears.
7. Red, settled, not an incident: the head's *tree* is an attempt when not seen red before (an
   empty retrigger commit has the same tree); at ``threshold`` distinct red trees the PR is
   escalated: one comment headed ``Fix loop escalated — human attention needed`` with the
   failing checks, the failure evidence and the number of kicks actually delivered, and the
   ``needs-human`` label. A PR escalated a second time after a reviewer's pass gets the hand-off
   note instead (what was tried since, the head the reviewer left, no further automated pass).
8. Staleness: an unchanged red head whose CI settled ``stale_after_s`` ago is re-engaged (a kick
   to its owning agent, falling back to the fixer, then the scanner, when the owner is paused
   or unreachable, :mod:`repeat_failure.fixloop.notify`), at most ``max_reengagements`` times per
   head SHA, spaced at least ``stale_after_s`` and the owner's ``cadence_s``; a kick counts only
   when delivered. A branch that moves resets the count.
9. Entries are pruned ``prune_after_s`` after their PR stops being listed.

Nothing here raises for what the forge answers: API errors are counted by reason and the PR (or
repository) is retried next pass.

Here: the ladder (:class:`Sweeper`, rules 1-2 and 4-9) and its counters (:class:`SweepStats`).
Rule 3, a head's CI state, is :mod:`repeat_failure.fixloop.ci_state`; the comments the ladder
posts are :mod:`repeat_failure.fixloop.comments`.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from repeat_failure.fixloop.ci_state import GREEN, NO_CHECKS, PENDING, RED, CiState, ci_state
from repeat_failure.fixloop.comments import (MAX_LISTED, code, escalation_comment, excerpt,
                                             handoff_note)
from repeat_failure.fixloop.config import FixloopConfig
from repeat_failure.fixloop.github import Check, GitHub, GitHubError, PullRequest
from repeat_failure.fixloop.ledger import Entry, Ledger, pr_key
from repeat_failure.fixloop.notify import Notifier

log = logging.getLogger("repeat_failure")

FIRST, HANDOFF = "first", "handoff"
UNPARK_GREEN, UNPARK_BREAKAGE, UNPARK_LABEL = "green", "breakage_cleared", "label_removed"


@dataclass
class SweepStats:
    """Counters since the process started (Prometheus counters) and the last pass's view for
    the gauges. Keys: ``(repository, kind)`` for escalations, ``(repository, outcome)`` for
    re-engagements, ``(repository, reason)`` for un-parks, ``reason`` for API errors,
    ``outcome`` for sweeps."""

    escalations: Counter = field(default_factory=Counter)
    reengagements: Counter = field(default_factory=Counter)
    incidents: Counter = field(default_factory=Counter)
    unparked: Counter = field(default_factory=Counter)
    api_errors: Counter = field(default_factory=Counter)
    sweeps: Counter = field(default_factory=Counter)
    ledger_errors: int = 0
    last_complete: float | None = None
    #: The last pass's view: red trees per (repository, number), escalated PRs and shared
    #: breakage checks per repository (repositories listed in that pass).
    red_trees: dict = field(default_factory=dict)
    escalated: dict = field(default_factory=dict)
    shared_checks: dict = field(default_factory=dict)
    #: Seconds each open agent PR's head has been inconclusive, per (repository, number)
    #: (only PRs inconclusive in the last pass), and per repository how many of them are past
    #: ``inconclusive_after_s``.
    inconclusive: dict = field(default_factory=dict)
    inconclusive_over: dict = field(default_factory=dict)
    #: Draft PRs skipped in the last pass, per repository.
    drafts_skipped: dict = field(default_factory=dict)


class Sweeper:
    """Runs passes for ``config`` against ``github``, keeping ``ledger`` and kicking through
    ``notifier``. ``clock`` gives epoch seconds. ``on_escalation(repo, number, message)`` is
    called after each escalation (the Kubernetes Event, when on)."""

    def __init__(self, config: FixloopConfig, github: GitHub, ledger: Ledger,
                 notifier: Notifier, clock: Callable[[], float] = time.time,
                 on_escalation: Callable[[str, int, str], None] | None = None) -> None:
        self.config = config
        self.github = github
        self.ledger = ledger
        self.notifier = notifier
        self.clock = clock
        self.on_escalation = on_escalation
        self.stats = SweepStats()
        self._shared_before: dict[str, set[str]] = {}
        self._agent_kicked: dict[str, float] = {}  # agent login -> last kick attempt
        self._maybe_shared: dict[str, set[str]] = {}  # repo -> checks possibly still shared
        self._unparked: set[str] = set()  # PRs this process un-parked (their label is gone)
        self._limited = False
        self._bots = {b.lower() for b in config.bots}
        #: (repository, number) -> [head SHA, first pass seen inconclusive, reported]
        self._inconclusive: dict[tuple[str, int], list] = {}
        self._authors = {a.lower() for a in config.authors}

    # -- one pass ------------------------------------------------------------------------------

    def run_once(self) -> str:
        """One pass over every repository; returns its outcome: ``complete`` (every repository
        listed), ``partial`` (some listings failed) or ``failed`` (none listed)."""
        now = self.clock()
        # No retry or rate-limit wait may run into the next pass: past this, calls fail fast.
        self.github.wait_deadline = now + self.config.interval_s
        self.github.token_source.new_pass()  # a 401 may replace a token once this pass
        self._limited = False
        listed: dict[str, list[PullRequest]] = {}
        for repo in self.config.repositories:
            try:
                listed[repo] = self._call(self.github.open_pulls, repo)
            except GitHubError as exc:
                self._api_error(exc, repo=repo)
        states: dict[tuple[str, int], CiState | None] = {}
        for repo, prs in listed.items():
            for pr in prs:  # bots too: their red checks count towards shared breakage
                try:
                    states[(repo, pr.number)] = ci_state(self._call(self.github.checks, repo,
                                                                    pr.head_sha))
                except GitHubError as exc:
                    self._api_error(exc, repo=repo, number=pr.number)
                    states[(repo, pr.number)] = None  # cannot conclude: like pending
        failed_writes = False
        inconclusive: dict[tuple[str, int], float] = {}
        drafts: Counter = Counter({repo: 0 for repo in listed})
        for repo, prs in listed.items():
            shared = self._shared(repo, prs, states)
            # The PRs kicked longest ago (or never) first: an agent's cadence is shared by its
            # PRs, and each gets its turn.
            for pr in sorted(prs, key=self._last_kick):
                if not self._agent_pr(pr):
                    continue
                if pr.draft and not self.config.include_drafts:
                    drafts[repo] += 1
                    failed_writes |= not self._keep(pr, now)
                    continue
                age = self._track_inconclusive(pr, states[(repo, pr.number)], now)
                if age is not None:
                    inconclusive[(repo, pr.number)] = age
                try:
                    self._apply(pr, states[(repo, pr.number)], shared, now)
                except sqlite3.Error as exc:  # a locked or full ledger: this PR waits a pass
                    failed_writes = True
                    self.stats.ledger_errors += 1
                    log.error("fix-loop ledger not written; the PR is looked at again next pass",
                              extra={"event": "fixloop_ledger_error", "pr": pr_key(repo, pr.number),
                                     "error": exc.__class__.__name__})
            try:
                gone = self.ledger.prune({repo}, now - self.config.prune_after_s)
            except sqlite3.Error:
                failed_writes, gone = True, []
                self.stats.ledger_errors += 1
            if gone:
                log.info("fix-loop ledger entries pruned", extra={
                    "event": "fixloop_pruned", "repository": repo, "prs": gone})
        for key in [k for k in self._inconclusive if k not in inconclusive and k[0] in listed]:
            del self._inconclusive[key]  # concluded, closed or a draft (an unlisted repo waits)
        self.stats.inconclusive = inconclusive
        over = self.config.inconclusive_after_s
        self.stats.inconclusive_over = {repo: sum(1 for (r, _), age in inconclusive.items()
                                                  if r == repo and age >= over)
                                        for repo in listed}
        self.stats.drafts_skipped = dict(drafts)
        try:
            self._view(listed)
        except sqlite3.Error:
            self.stats.ledger_errors += 1
            failed_writes = True
        complete = (len(listed) == len(self.config.repositories) and not failed_writes
                    and not self._limited)
        outcome = "complete" if complete else "partial" if listed else "failed"
        self.stats.sweeps[outcome] += 1
        if outcome == "complete":
            self.stats.last_complete = self.clock()  # when it finished
        return outcome

    def _keep(self, pr: PullRequest, now: float) -> bool:
        """A skipped draft's ledger entry, if it has one, is kept as it is (only ``last_seen``
        moves, so it is not pruned while the PR is open); False when the write failed."""
        try:
            entry = self.ledger.get(pr_key(pr.repo, pr.number))
            if entry is not None:
                entry.last_seen = now
                self.ledger.put(entry)
            return True
        except sqlite3.Error:
            self.stats.ledger_errors += 1
            return False

    def _track_inconclusive(self, pr: PullRequest, state: CiState | None,
                            now: float) -> float | None:
        """How long ``pr``'s head has been inconclusive (seconds since the first pass that
        found this head SHA pending, or its checks unreadable), or ``None`` when this pass
        concluded it. The first pass past ``inconclusive_after_s`` logs one
        ``fixloop_inconclusive`` warning for the head, naming the checks that keep it so and
        GitHub's word for each (the clock is this process's: it restarts with the pod)."""
        key = (pr.repo, pr.number)
        if state is not None and state.state != PENDING:
            return None
        seen = self._inconclusive.get(key)
        if seen is None or seen[0] != pr.head_sha:
            seen = self._inconclusive[key] = [pr.head_sha, now, False]
        age = now - seen[1]
        if age >= self.config.inconclusive_after_s and not seen[2]:
            seen[2] = True
            waiting = [f"{c.name}: {c.conclusion or c.status}" for c in state.waiting] \
                if state is not None else []
            log.warning("fix loop cannot conclude CI for a PR head: no attempt, kick, "
                        "escalation or un-park until it does", extra={
                            "event": "fixloop_inconclusive", "pr": pr_key(pr.repo, pr.number),
                            "head_sha": pr.head_sha, "seconds": round(age),
                            "reason": "checks_unreadable" if state is None else "pending",
                            "waiting": waiting[:MAX_LISTED]})
        return age

    def _agent_pr(self, pr: PullRequest) -> bool:
        """Whether ``pr`` can be a fix loop: not a dependency bot's, and by one of ``authors``
        when that list is given (every PR still counts towards shared breakage)."""
        author = pr.author.lower()
        return author not in self._bots and (not self._authors or author in self._authors)

    def _last_kick(self, pr: PullRequest) -> float:
        try:
            entry = self.ledger.get(pr_key(pr.repo, pr.number))
        except sqlite3.Error:
            entry = None
        return entry.last_kick_at if entry is not None and entry.last_kick_at is not None \
            else float("-inf")

    def _call(self, method: Callable, *args: object):
        """``method(*args)``, unless a rate limit already stopped this pass (then
        ``rate_limited`` without a request); a ``rate_limited`` answer stops the pass's calls."""
        if self._limited:
            skipped = GitHubError("rate_limited", "rate limited earlier in this pass")
            skipped.skipped = True  # type: ignore[attr-defined]  # no request was made: not counted again
            raise skipped
        try:
            return method(*args)
        except GitHubError as exc:
            if exc.reason == "rate_limited":
                self._limited = True
            raise

    def _shared(self, repo: str, prs: list[PullRequest],
                states: dict[tuple[str, int], CiState | None]) -> set[str]:
        """Names of the checks red on more than ``shared_breakage_prs`` open PRs of ``repo``
        this pass (red on a PR and on at least that many others, dependency bots' PRs
        included); counts a new incident when a name was not shared in the previous pass, and
        keeps in ``_maybe_shared`` the names that could still be shared were every PR whose CI
        is unknown red on them (a breakage clears only once a name is not among those)."""
        red_on: Counter = Counter()
        unknown = 0  # PRs whose CI this pass could not conclude
        for pr in prs:
            state = states.get((repo, pr.number))
            if state is None or state.state == PENDING:
                unknown += 1
            elif state.state == RED:
                red_on.update({c.name for c in state.failing})
        need = self.config.shared_breakage_prs + 1
        shared = {name for name, n in red_on.items() if n >= need}
        # A breakage is over only when it could not be shared even if every PR whose CI is
        # still unknown turned out red on it; until then it is still "on" for un-parking.
        candidates = set(red_on) | self._shared_before.get(repo, set())
        self._maybe_shared[repo] = {name for name in candidates if red_on[name] + unknown >= need}
        for name in sorted(shared - self._shared_before.get(repo, set())):
            self.stats.incidents[repo] += 1
            log.warning("shared CI breakage: a check is red on many open PRs; not counted as "
                        "fix attempts", extra={"event": "fixloop_shared_breakage",
                                               "repository": repo, "check": name,
                                               "prs": red_on[name]})
        self._shared_before[repo] = shared
        return shared

    # -- the rules for one PR --------------------------------------------------------------------

    def _apply(self, pr: PullRequest, state: CiState | None, shared: set[str],
               now: float) -> None:
        key = pr_key(pr.repo, pr.number)
        entry = self.ledger.get(key) or Entry(pr.repo, pr.number, now)
        entry.last_seen = now
        # GitHub label names are case-insensitive.
        labeled = self.config.label.lower() in {name.lower() for name in pr.labels}
        if labeled:
            if not entry.escalated:  # rule 5: the label says escalated, whatever the ledger
                entry.escalated, entry.escalated_at, entry.adopted = True, now, True
                # The label says the PR was escalated once: a later escalation after a green
                # head or a person's removal is a second one (the hand-off note).
                entry.escalations = max(entry.escalations, 1)
                log.info("PR wears the escalation label: escalated (no comment posted)",
                         extra={"event": "fixloop_label_adopted", "pr": key})
            # Confirmed only by a listing that shows it (issue 31): GitHub's 200 to adding it
            # is not enough (another automation may strip it, or the add may not stick).
            entry.label_confirmed = True
            self._unparked.discard(key)
        elif entry.escalated and key in self._unparked:
            # This process took the label off and its ledger write failed: not a person.
            entry.reset()
            self._unparked.discard(key)
        elif entry.escalated and entry.label_confirmed:
            self._unpark(pr, entry, UNPARK_LABEL, now, comment=None)
        elif entry.escalated and not (state is not None and state.state == GREEN):
            self._relabel(pr, entry)  # (a green head un-parks it below: no label to add)
        if entry.escalated and entry.comment_pending and not entry.adopted:
            self._post_escalation(pr, entry, [c for c in (state.failing if state else ())
                                              if c.name in entry.escalated_checks])
        if state is None or state.state in (PENDING, NO_CHECKS):
            self._save(entry)
            return
        if state.state == GREEN:
            if entry.escalated:
                # Whoever put the label on (this ledger, or one lost since): the label is the
                # record, and a green head un-parks it (issue 31).
                self._unpark(pr, entry, UNPARK_GREEN, now,
                             comment=f"CI is green at `{pr.head_sha[:12]}`: the fix loop is "
                                     f"over. Removed `{self.config.label}`; the PR's attempt "
                                     "count starts again from zero.")
            else:
                entry.reset()
            self._save(entry)
            return
        failing = [c.name for c in state.failing]
        own = [c for c in state.failing if c.name not in shared]
        if entry.escalated:
            self._escalated_red(pr, entry, failing, shared, now)
            self._save(entry)
            return
        if not own:  # rule 4: every failing check is shared breakage
            entry.red_since = None
            self._save(entry)
            return
        if pr.head_sha != entry.head_sha:
            try:
                tree = self._call(self.github.head_tree, pr.repo, pr.head_sha)
            except GitHubError as exc:
                self._api_error(exc, repo=pr.repo, number=pr.number)
                self._save(entry)
                return
            entry.head_sha, entry.head_tree = pr.head_sha, tree
            # The branch moved: a new head's budget (design: per head SHA). The spacing since
            # the last kick still holds, so a branch moved by empty commits is not kicked faster.
            entry.reengagements = 0
            entry.red_since = None
        settled = state.settled_at if state.settled_at is not None else now
        if pr.head_sha == entry.reviewer_sha and entry.reviewed_at is not None:
            # The head a reviewer handed back: its staleness counts from the hand-back.
            settled = max(settled, entry.reviewed_at)
        if entry.red_since is None:
            entry.red_since = settled  # CI settled: the staleness clock starts
        elif state.red_at is not None and state.red_at > entry.red_since:
            entry.red_since = state.red_at  # a failing check re-ran and failed again
        entry.failing = [c.name for c in own]
        entry.excerpt = excerpt(own)
        if entry.head_tree and entry.head_tree not in entry.trees \
                and pr.head_sha != entry.reviewer_sha and entry.head_tree != entry.reviewer_tree:
            # The head a reviewer's pass left is where the new count starts, not an attempt.
            entry.trees.append(entry.head_tree)
        if len(entry.trees) >= self.config.threshold:
            self._escalate(pr, entry, own, now)
        else:
            self._maybe_kick(pr, entry, own, now)
        self._save(entry)

    def _escalated_red(self, pr: PullRequest, entry: Entry, failing: list[str],
                       shared: set[str], now: float) -> None:
        """Rule 6 for a parked PR: note when all its escalated checks are shared breakage, and
        un-park it once that breakage has cleared (``_maybe_shared``: not even the PRs whose CI
        is still unknown could keep it shared)."""
        over = set(entry.escalated_checks) or set(failing)
        if over and over <= shared:
            entry.over_incident = True  # everything it was escalated over is shared breakage
        elif entry.over_incident and not over & self._maybe_shared.get(pr.repo, set()):
            self._unpark(pr, entry, UNPARK_BREAKAGE, now,
                         comment="The shared CI breakage this PR was escalated over has "
                                 f"cleared ({', '.join(code(n) for n in sorted(over))} no "
                                 f"longer red on other open PRs). Removed "
                                 f"`{self.config.label}`; the PR's attempt count starts again "
                                 "from zero.")

    def _unpark(self, pr: PullRequest, entry: Entry, reason: str, now: float,
                comment: str | None) -> None:
        """Take the PR out of escalation: the label removed (unless a human already did), the
        ledger reset, a comment saying why (not when a human removed the label)."""
        if comment is not None:
            try:
                self._call(self.github.remove_label, pr.repo, pr.number, self.config.label)
            except GitHubError as exc:
                self._api_error(exc, repo=pr.repo, number=pr.number)
                return  # still escalated; the next pass tries again
            self._unparked.add(entry.key)
        if reason in (UNPARK_LABEL, UNPARK_GREEN):
            # The reviewer lane's pass: a de-escalation (the label removed) or a repair (the
            # head went green); a later escalation gets the hand-off note (issue 31).
            entry.reviewer_sha, entry.reviewed_at = pr.head_sha, now
            entry.reviewer_tree = entry.head_tree if entry.head_sha == pr.head_sha else None
        entry.reset()
        self.stats.unparked[(pr.repo, reason)] += 1
        log.info("fix loop un-parked", extra={"event": "fixloop_unparked",
                                              "pr": entry.key, "reason": reason})
        if comment is not None:
            # After the ledger is reset, so a lost comment cannot make the next pass read the
            # missing label as a person's removal.
            try:
                self._call(self.github.comment, pr.repo, pr.number, comment)
            except GitHubError as exc:
                self._api_error(exc, repo=pr.repo, number=pr.number)

    def _relabel(self, pr: PullRequest, entry: Entry) -> None:
        """An escalated PR whose label no listing has shown yet (the add did not stick, or
        something took it off before any pass saw it): not a person's removal of a confirmed
        label, so the label is added again (it is the record; adding it is idempotent)."""
        log.warning("escalation label not on the PR although it was added: adding it again",
                    extra={"event": "fixloop_label_missing", "pr": entry.key})
        try:
            self._call(self.github.add_label, pr.repo, pr.number, self.config.label)
        except GitHubError as exc:
            self._api_error(exc, repo=pr.repo, number=pr.number)

    def _escalate(self, pr: PullRequest, entry: Entry, failing: list[Check],
                  now: float) -> None:
        handoff = entry.escalations >= 1 and entry.reviewer_sha is not None
        try:
            # The label first: it is the record (rule 5), and adding it twice is harmless, so a
            # crash or a lost answer can never lead to a second comment.
            self._call(self.github.add_label, pr.repo, pr.number, self.config.label)
        except GitHubError as exc:
            self._api_error(exc, repo=pr.repo, number=pr.number)
            return  # not escalated; the next pass tries again
        # Not confirmed yet: only a later listing that shows the label confirms it (issue 31).
        entry.escalated, entry.escalated_at, entry.label_confirmed = True, now, False
        entry.escalations += 1
        entry.escalated_checks = [c.name for c in failing]
        self._post_escalation(pr, entry, failing)
        kind = HANDOFF if handoff else FIRST
        self.stats.escalations[(pr.repo, kind)] += 1
        log.warning("fix loop escalated: human attention needed", extra={
            "event": "fixloop_escalated", "pr": entry.key, "kind": kind,
            "red_trees": len(entry.trees), "kicks_delivered": entry.kicks_delivered,
            "failing": entry.escalated_checks})
        if self.on_escalation is not None:
            self.on_escalation(pr.repo, pr.number,
                               f"Fix loop escalated on {entry.key}: CI red on "
                               f"{len(entry.trees)} distinct head trees "
                               f"({', '.join(entry.escalated_checks)})")

    def _post_escalation(self, pr: PullRequest, entry: Entry, failing: list[Check]) -> None:
        """Post the escalation comment (the hand-off note for a second escalation after a
        reviewer's pass). A refusal that means nothing was posted (4xx, a rate limit, auth) is
        tried again next pass (``comment_pending``); a lost answer (5xx, timeout, network) is
        not, as the comment may be out."""
        handoff = entry.escalations >= 2 and entry.reviewer_sha is not None
        body = (handoff_note if handoff else escalation_comment)(self.config, pr, entry,
                                                                 failing)
        try:
            self._call(self.github.comment, pr.repo, pr.number, body)
            entry.comment_pending = False
        except GitHubError as exc:
            self._api_error(exc, repo=pr.repo, number=pr.number)
            entry.comment_pending = exc.reason in ("http_4xx", "auth", "rate_limited")

    def _maybe_kick(self, pr: PullRequest, entry: Entry, failing: list[Check],
                    now: float) -> None:
        """Rule 8: re-engage an unchanged red head once it has been stale long enough."""
        cfg = self.config
        if entry.red_since is None or now - entry.red_since < cfg.stale_after_s:
            return
        if entry.reengagements >= cfg.max_reengagements:
            return
        owner = cfg.endpoint(pr.author)
        spacing = max(cfg.stale_after_s, owner.cadence_s if owner else 0.0)
        if entry.last_kick_at is not None and now - entry.last_kick_at < spacing:
            return
        if owner is not None and owner.cadence_s:
            # The agent's cadence is the agent's, over all its PRs: one kick per cadence.
            last = self._agent_kicked.get(owner.login.lower())
            if last is not None and now - last < owner.cadence_s:
                return
        kick = self.notifier.kick(pr.author, {
            "kind": "fix_before_new", "repository": pr.repo, "number": pr.number,
            "url": pr.url, "head_sha": pr.head_sha, "failing_checks": [c.name for c in failing],
            "excerpt": entry.excerpt, "reengagement": entry.reengagements + 1,
            "max_reengagements": cfg.max_reengagements})
        self.stats.reengagements[(pr.repo, "delivered" if kick.delivered else "failed")] += 1
        # Attempts are spaced whether or not they were taken (a webhook that is down is not
        # hammered every pass); only a delivered kick is charged to the budget.
        entry.last_kick_at = now
        if owner is not None:
            self._agent_kicked[owner.login.lower()] = now
        if kick.delivered:
            entry.reengagements += 1
            entry.kicks_delivered += 1
            log.info("re-engagement delivered", extra={
                "event": "fixloop_reengaged", "pr": entry.key, "target": kick.target,
                "reengagement": entry.reengagements})

    # -- bookkeeping ----------------------------------------------------------------------------

    def _save(self, entry: Entry) -> None:
        """Keep rows that carry something; a PR with nothing tried and not escalated needs no
        row (a green or never-red PR), unless it holds the reviewer's stamp."""
        if (entry.trees or entry.escalated or entry.red_since is not None
                or entry.reviewer_sha is not None or entry.escalations):
            self.ledger.put(entry)
        else:
            self.ledger.delete(entry.key)

    def _api_error(self, exc: GitHubError, repo: str, number: int | None = None) -> None:
        if getattr(exc, "skipped", False):
            return
        self.stats.api_errors[exc.reason] += 1
        log.warning("GitHub API call failed; retried next pass", extra={
            "event": "fixloop_api_error", "reason": exc.reason, "status": exc.status,
            "repository": repo, "number": number})

    def _view(self, listed: dict[str, list[PullRequest]]) -> None:
        red: dict[tuple[str, int], int] = {}
        escalated: Counter = Counter({repo: 0 for repo in listed})
        open_keys = {(pr.repo, pr.number) for prs in listed.values() for pr in prs}
        for entry in self.ledger.entries():
            if (entry.repo, entry.number) not in open_keys:
                continue
            if entry.trees:
                red[(entry.repo, entry.number)] = len(entry.trees)
            if entry.escalated:
                escalated[entry.repo] += 1
        self.stats.red_trees = red
        self.stats.escalated = dict(escalated)
        self.stats.shared_checks = {repo: len(self._shared_before.get(repo, set()))
                                    for repo in listed}
