"""The fix loop's comments on a pull request (design adr-0010, docs/fixloop.md): the first
escalation's comment (:func:`escalation_comment`), the hand-off note of a second escalation
(:func:`handoff_note`) and the failure evidence they quote (:func:`excerpt`). Markdown built so
that nothing taken from CI (check names, URLs, output) can mention anyone, inject markup or
close a block early; the evidence is scrubbed here (check names already are, by
:mod:`repeat_failure.fixloop.ci_state`), and a body is cut to what GitHub accepts.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from repeat_failure.fixloop.config import ESCALATION_HEADING, FixloopConfig
from repeat_failure.fixloop.github import Check, PullRequest
from repeat_failure.fixloop.ledger import Entry
from repeat_failure.rules.scrub import scrub

#: Characters of failure evidence kept per failing check (scrubbed), and in all.
MAX_EXCERPT_PER_CHECK = 1500
MAX_EXCERPT = 6000
#: Failing checks listed in a comment at most.
MAX_LISTED = 30
#: A comment longer than this is cut (GitHub refuses bodies over 65,536 characters).
MAX_COMMENT = 60000


def excerpt(failing: list[Check]) -> str:
    """The failure evidence of ``failing`` checks: each check's summary (check-run output or
    status description), scrubbed, at most :data:`MAX_EXCERPT_PER_CHECK` characters each and
    :data:`MAX_EXCERPT` in all; ``""`` when no check says anything."""
    parts = []
    for check in failing:
        text = scrub(check.summary.strip())
        if not text:
            continue
        if len(text) > MAX_EXCERPT_PER_CHECK:
            text = text[:MAX_EXCERPT_PER_CHECK - 1] + "…"
        parts.append(f"== {check.name} ==\n{text}")
    joined = "\n\n".join(parts)
    return joined if len(joined) <= MAX_EXCERPT else joined[:MAX_EXCERPT - 1] + "…"


def _fence(text: str) -> str:
    """``text`` in a fenced block no line of it can close (a longer fence than any run of
    backticks in it)."""
    longest = max((len(run) for run in text.split("\n") for run in _backtick_runs(run)),
                  default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _backtick_runs(line: str) -> list[str]:
    runs, current = [], ""
    for ch in line:
        if ch == "`":
            current += ch
        elif current:
            runs.append(current)
            current = ""
    if current:
        runs.append(current)
    return runs


def code(text: str) -> str:
    """``text`` as an inline code span (no backtick or line break inside it can end the span,
    so an ``@mention`` or HTML in a check name stays inert)."""
    clean = " ".join(text.replace("`", "'").split())
    return f"`{clean}`" if clean else "`(unnamed)`"


_SAFE_URL = re.compile(r"\Ahttps?://[A-Za-z0-9._~:/?#\[\]@!$&'*+,;=%-]+\Z")


def _link(url: str) -> str:
    """`` ([details](url))`` for a plain http(s) URL the scrubber leaves alone (a URL holding a
    token-shaped query value, or characters that could end the link, gets no link)."""
    if not url or not _SAFE_URL.match(url) or scrub(url) != url:
        return ""
    return f" ([details]({url.replace(')', '%29').replace('(', '%28')}))"


def _checks_list(failing: list[Check]) -> str:
    lines = [f"- {code(c.name)}: {code(c.conclusion or 'failed')}{_link(c.url)}"
             for c in failing[:MAX_LISTED]]
    if len(failing) > MAX_LISTED:
        lines.append(f"- … and {len(failing) - MAX_LISTED} more")
    return "\n".join(lines) or "- (no check named)"


def _cut_comment(body: str) -> str:
    """``body`` cut to :data:`MAX_COMMENT` characters (GitHub refuses longer ones)."""
    return body if len(body) <= MAX_COMMENT else body[:MAX_COMMENT - 40] + "\n\n… (cut)"


def _evidence(entry: Entry) -> str:
    if not entry.excerpt:
        return "No failure evidence was available from the checks."
    return ("<details><summary>Failure evidence (check output, scrubbed)</summary>\n\n"
            f"{_fence(entry.excerpt)}\n\n</details>")


def escalation_comment(config: FixloopConfig, pr: PullRequest, entry: Entry,
                       failing: list[Check]) -> str:
    """The first escalation's comment (Markdown): the heading, why, the failing checks, the
    kicks actually delivered, the evidence, how to hand the PR back."""
    return _cut_comment("\n".join([
        f"## {ESCALATION_HEADING}",
        "",
        f"CI has been red on {len(entry.trees)} distinct head trees of this pull request "
        f"(the limit is {config.threshold}), so automated fix attempts stop here: the "
        f"`{config.label}` label is applied and fix dispatch skips this PR.",
        "",
        f"**Failing checks** at `{pr.head_sha[:12]}`:",
        _checks_list(failing),
        "",
        f"**Re-engagements delivered:** {entry.kicks_delivered} (kicks to the owning agent "
        f"for an unchanged red head; at most {config.max_reengagements} per head).",
        "",
        _evidence(entry),
        "",
        f"Remove the `{config.label}` label to hand the PR back to the agents with a fresh "
        "budget.",
    ]))


def handoff_note(config: FixloopConfig, pr: PullRequest, entry: Entry,
                 failing: list[Check]) -> str:
    """A second escalation's comment, after a reviewer's pass: the structured hand-off (what
    was tried since, the head the reviewer left, counted from that pass, no further automated
    pass coming)."""
    when = (datetime.fromtimestamp(entry.reviewed_at, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            if entry.reviewed_at is not None else "an earlier pass")
    trees = "\n".join(f"  - `{t[:12]}`" for t in entry.trees)
    return _cut_comment("\n".join([
        f"## {ESCALATION_HEADING}",
        "",
        "**Hand-off: no further automated pass is coming.** This pull request was escalated "
        "before, and a reviewer's pass handed it back; CI is red again.",
        "",
        f"- The reviewer's pass ({when}) left the branch at `{(entry.reviewer_sha or '')[:12]}`.",
        f"- Counted from that pass, CI has been red on {len(entry.trees)} distinct head trees "
        f"(the limit is {config.threshold}):",
        trees,
        f"- Re-engagements delivered since: {entry.kicks_delivered}.",
        "",
        f"**Failing checks** at `{pr.head_sha[:12]}`:",
        _checks_list(failing),
        "",
        _evidence(entry),
        "",
        f"The `{config.label}` label is applied again. A person needs to take this PR from "
        "here.",
    ]))
