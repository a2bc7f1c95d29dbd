"""Scrub: replace token-shaped strings in command text with ``[REDACTED]``.

Raw records may hold secrets (spec Constraints, C-AC13). Every command passes through
:func:`scrub` right after parsing; only its output is normalized, counted, stored in the state
file, logged or exported.

The rules, in the order they apply, are the table of :mod:`repeat_failure.rules.scrub_rules`
(private key blocks, token formats their issuers publish, credentials by position, names that
say secret: :mod:`repeat_failure.rules.scrub_names`, the command's grammar:
:mod:`repeat_failure.rules.scrub_context` and :mod:`repeat_failure.rules.scrub_setters`); this
module is the engine that runs
them: :func:`scrub` gates each rule on its needs groups and applies those that may match
(:func:`apply_rule`).

Speed: every rule carries *needs groups*, substrings taken from the literal text its pattern must
match; the pattern runs only when each group has one of its substrings in the command. One
Aho-Corasick pass (pyahocorasick, a C extension) over the command's case fold finds every
needle present at once, so the cost of the gate does not grow with the number of rules: 1.3 µs
per command of the false-positive corpus, where testing the 150 rules' first groups (420
needles) with ``in`` costs 37 µs (issue 16's measure, same run; ahocorasick-rs took 0.9 µs but
returns indexes to look up again, and building it from source needs a Rust toolchain;
the 0.4 µs is 3 % of a record's pipeline cost). ``tests/test_scrub_gating.py`` checks that the
groups never skip a rule that would redact; ``python -m benchmarks`` measures the pipeline.
"""

from __future__ import annotations

import re

import ahocorasick

from repeat_failure.rules import scrub_engine
from repeat_failure.rules.scrub_names import REDACTED, fold
from repeat_failure.rules.scrub_rules import CUT_RULES, RULES, Replacement


# --- the gate --------------------------------------------------------------------------------

class _Gate:
    """Which rules may match a text, from one Aho-Corasick pass over its case fold.

    Each rule is indexed under one of its needs groups (the one whose shortest needle is
    longest, so the most selective): a rule is a *candidate* when a needle of that group, case
    folded, is in the text's fold (a necessary condition of the group: a case-sensitive needle
    in the text is, folded, in the fold). A candidate then runs only when every one of its
    groups holds exactly (``in`` on the text or the fold). A rule whose every group holds a
    one-character needle is a candidate always (such needles are in nearly every command)."""

    def __init__(self, rules: tuple[tuple, ...]) -> None:
        self.rules = [(rule[0], rule[1], tuple(rule[2:])) for rule in rules]
        self.automaton = ahocorasick.Automaton()
        masks: dict[str, int] = {}
        self.always = 0
        for i, (_, _, groups) in enumerate(self.rules):
            assert groups, f"rule {i} has no needs group"
            best = max(groups, key=lambda g: min(len(n) for n in g[0]))
            if min(len(n) for n in best[0]) < 2:
                self.always |= 1 << i
                continue
            for needle in best[0]:
                key = fold(needle)
                masks[key] = masks.get(key, 0) | 1 << i
        for key, mask in masks.items():
            self.automaton.add_word(key, mask)
        self.automaton.make_automaton()

    def candidates(self, fold: str) -> int:
        """The bit mask of the candidate rules for a text whose fold is ``fold``."""
        mask = self.always
        for _, rules in self.automaton.iter(fold):
            mask |= rules
        return mask


_CONTINUATION = re.compile(r"\\\r?\n")
#: The last word (``\S+\Z``; the look-behind starts it only where a word starts, else the
#: search is quadratic in the length of a text holding no space near its end).
_LAST_WORD = re.compile(r"(?<!\S)\S+\Z")

_GATE = _Gate(RULES)
_GATE_CUT = _Gate(RULES + CUT_RULES)


def apply_rule(pattern: re.Pattern[str], replacement: Replacement, text: str) -> str:
    """One rule of :data:`RULES` applied to ``text``: ``pattern.sub(replacement, text)``, or
    ``replacement(pattern, text)`` for a replacement that reads the whole text (one with a true
    ``whole_text`` attribute, such as
    :func:`repeat_failure.rules.scrub_replacements.shell_assignments`)."""
    if getattr(replacement, "whole_text", False):
        return replacement(pattern, text)  # type: ignore[operator, call-arg, arg-type]
    return pattern.sub(replacement, text)



#: A Subresource Integrity digest (W3C SRI; npm's ``integrity``, ``--integrity``, an HTML
#: ``integrity=`` attribute): a hash algorithm, ``-``, the digest in base64 (sha1: 27 characters
#: and ``=``, sha256: 43 and ``=``, sha384: 64, sha512: 86 and ``==``). A digest of public
#: content, no secret; but its base64 holds runs that read as a name before ``=``
#: (``...Htbu7CPw==``: ``pw``) or as a vendor's token after a ``/`` (``AP3sFdN8…``).
_SRI = re.compile(r"(?<![A-Za-z0-9+/_-])sha(?:1-[A-Za-z0-9+/]{27}=|256-[A-Za-z0-9+/]{43}="
                  r"|384-[A-Za-z0-9+/]{64}|512-[A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])")
#: The characters that stand for a digest while the rules run (Unicode's private use area: no
#: rule matches one as a letter, a digit or a token character; one character, so no rule takes
#: part of it). A text already holding one is not masked.
_MASK = 0xE000
_MASK_COUNT = 6400
_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")


def _mask_digests(text: str) -> tuple[str, list[str]]:
    """``text`` with each SRI digest (:data:`_SRI`) replaced by one private-use character, and
    the digests in order; ``(text, [])`` when it holds none (or already holds such a
    character)."""
    if "sha" not in text or _SRI.search(text) is None or _PRIVATE_USE.search(text):
        return text, []
    digests: list[str] = []

    def one(m: re.Match[str]) -> str:
        digests.append(m[0])
        return chr(_MASK + len(digests) - 1)
    return _SRI.sub(one, text, count=_MASK_COUNT), digests


#: How many times :func:`scrub` runs the rule table at most over a text it keeps changing (a
#: pass that changes nothing ends it; the second pass is all but a few hostile texts need).
MAX_PASSES = 4


def _one_pass(text: str, gate: _Gate, upto: int = -1) -> tuple[str, int]:
    """``text`` with the rules of ``gate`` applied once, in order, each to the text as the
    rules before it left it (only those the gate's needs groups let through), and the bit of the
    last rule that changed it (0: none did). ``upto`` (a bit mask) limits the rules tried until
    one changes the text; after a change every later rule is tried."""
    rules = gate.rules
    hay = [text, fold(text)]
    mask = gate.candidates(hay[1]) & upto
    last = 0
    while mask:
        low = mask & -mask
        mask ^= low
        pattern, replacement, groups = rules[low.bit_length() - 1]
        for needles, where in groups:
            haystack = hay[where]
            for needle in needles:
                if needle in haystack:
                    break
            else:
                break  # a group without its needle: the pattern cannot match
        else:
            changed = apply_rule(pattern, replacement, text)
            if changed != text:
                text, last = changed, low
                hay[0], hay[1] = text, fold(text)
                # The rules after this one see the text as it now stands.
                mask = gate.candidates(hay[1]) & ~((low << 1) - 1)
    return text, last


def scrub(text: str, cut: bool = False) -> str:
    """Return ``text`` with every token-shaped string replaced by ``[REDACTED]``.

    Backslash-newline line continuations are removed first (as the shell does), so a value on the
    next line is still seen as the flag's value. ``cut`` says the route shortened the command:
    its last word may be the head of a secret too short to match any rule, so it is redacted
    too, and a quoted value of a secret-named key left open by the cut (:data:`CUT_RULES`) is
    redacted to the end. Idempotent: ``scrub(scrub(t)) == scrub(t)``. Never raises for any ``str``.

    A text one pass of the table changed is passed again, until a pass changes nothing (at most
    :data:`MAX_PASSES`): a rule's match can cover another rule's (a name that says nothing
    taking ``api_key= ...`` for its value, ``[REDACTED]=``) until a later rule redacts part
    of it, and then only the next pass sees what was hidden (issue 27's break-it run: 8 of
    187,000 random texts a second ``scrub()`` changed). A text no rule changes costs one pass;
    a pass after one that changed it tries only the rules up to the last that changed it (those
    after it already saw the text as it stands).
    Subresource Integrity digests (:data:`_SRI`) are hidden from the rules while they run: a
    digest is no secret, whatever runs of its base64 look like (a secret's value that is one,
    ``TOKEN=sha256-…``, still goes).
    """
    if "\\" in text:
        text = _CONTINUATION.sub("", text)
    gate = _GATE_CUT if cut else _GATE
    text, digests = _mask_digests(text)
    upto = -1
    for _ in range(MAX_PASSES):
        text, last = _one_pass(text, gate, upto)
        if not last:
            break
        # The rules after the last one that changed the text saw it as it now stands and left
        # it: the next pass needs only that rule and those before it (until one changes it).
        upto = (last << 1) - 1
    for i, digest in enumerate(digests):
        text = text.replace(chr(_MASK + i), digest)
    if cut:
        text = _LAST_WORD.sub(REDACTED, text)
    return text


scrub_engine.register(scrub)
