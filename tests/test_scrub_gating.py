"""The fast paths of the pipeline (issue 6, throughput) change no result.

The scrubber runs a rule only when the rule's needs groups hold (:mod:`repeat_failure.rules.scrub`), the
normalizer runs its tmp and time patterns only when a cheap test says they may match, and the
exclusion list is tested with two C calls. Each is checked here against the plain form it
replaces: the groups must be necessary conditions of a match, so gating never changes what is
redacted or how a command is normalized.
"""

from __future__ import annotations

import random
import re
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repeat_failure.rules import normalize as norm
from repeat_failure.rules import scrub as sc
from repeat_failure.rules import scrub_names, scrub_rules
from repeat_failure.backends import wrapper_stripper
from repeat_failure.rules.exclude import Exclusions

# Characters ``(?i)`` matches to an ASCII letter besides the letter's two cases.
UNICODE_CASES = {"s": "\u017f", "i": "\u0131\u0130", "k": "\u212a"}


def ungated_scrub(text: str, cut: bool = False) -> str:
    """scrub() with no needs groups: every rule runs, in order (the cut rules too for a cut
    text)."""
    text = re.sub(r"\\\r?\n", "", text)
    for rule in scrub_rules.RULES + (scrub_rules.CUT_RULES if cut else ()):
        text = sc.apply_rule(rule[0], rule[1], text)
    if cut:
        text = re.sub(r"\S+\Z", sc.REDACTED, text)
    return text


def _unicode_variants(text: str, rng: random.Random) -> str:
    return "".join(rng.choice(UNICODE_CASES[c.lower()]) if c.lower() in UNICODE_CASES
                   and rng.random() < 0.5 else c for c in text)


ALL_RULES = scrub_rules.RULES + scrub_rules.CUT_RULES


@pytest.mark.parametrize("index", range(len(ALL_RULES)))
def test_needs_groups_hold_wherever_the_rule_redacts(index: int) -> None:
    """Strings drawn from each rule's own pattern (and, for ``(?i)`` rules, the same strings
    spelled with U+017F, U+0131, U+0130, U+212A) satisfy each of its _cs/_ci groups whenever
    the rule changes them: a group never skips a rule that would have redacted something (a
    rule whose replacement decides, such as the assignments whose name must say secret, may
    match more than it changes). On those strings scrub() gives what running every rule
    gives, cut or not (the cut rules are checked here too)."""
    pattern, replacement, groups = ALL_RULES[index][0], ALL_RULES[index][1], ALL_RULES[index][2:]
    rng = random.Random(index)

    def holds(text: str) -> None:
        assert sc.scrub(text) == ungated_scrub(text), (index, text)
        assert sc.scrub(text, cut=True) == ungated_scrub(text, cut=True), (index, text)
        if sc.apply_rule(pattern, replacement, text) == text:
            return
        hay = {scrub_rules.TEXT: text, scrub_rules.FOLD: scrub_names.fold(text)}
        for needles, where in groups:
            assert any(n in hay[where] for n in needles), (index, text, needles)

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.from_regex(pattern))
    def check(text: str) -> None:
        holds(text)
        if pattern.flags & re.IGNORECASE:
            holds(_unicode_variants(text, rng))

    check()


def test_fold_maps_every_ignorecase_letter() -> None:
    """Every character ``(?i)`` matches to an ASCII letter folds to that letter, so a _ci
    needle (lowercase ASCII) is in the fold wherever a ``(?i)`` literal matches."""
    letters = re.compile(r"(?i)[a-z]")
    for code in range(0x110000):
        char = chr(code)
        if letters.fullmatch(char):
            (letter,) = [a for a in string.ascii_lowercase if re.fullmatch("(?i)" + a, char)]
            assert scrub_names.fold(char) == letter, hex(code)
    assert scrub_names.fold("A\u017f\u0131\u0130\u212a") == "asiik"


def _corpus(seed: int, count: int) -> list[str]:
    """Commands built from every rule's needles and literal words, random tokens and shell
    punctuation, some spelled with the Unicode case variants."""
    rng = random.Random(seed)
    words = {"[REDACTED]", "\\\n", "\n", "'", '"', "=", ":", "@", "?", "&", " -p ", " -u ",
             "--password ", "Authorization: Bearer ", "https://u:p@h/", "AKIA", "12345678:"}
    for rule in ALL_RULES:
        words.update(n for needles, _ in rule[2:] for n in needles)
        words.update(re.findall(r"[A-Za-z0-9_.:/@%&?=-]{2,}", rule[0].pattern.replace("\\", "")))
    pool = sorted(words)
    alphabets = [string.ascii_letters + string.digits, string.ascii_lowercase + string.digits,
                 string.ascii_uppercase + string.digits, string.digits, string.ascii_letters + "-_"]
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 10)):
            if rng.random() < 0.6:
                parts.append(rng.choice(pool))
            else:
                alphabet = rng.choice(alphabets)
                parts.append("".join(rng.choice(alphabet) for _ in range(rng.choice(
                    [6, 12, 16, 20, 24, 32, 35, 36, 40, 64]))))
        text = ("" if rng.random() < 0.5 else " ").join(parts)
        out.append(_unicode_variants(text, rng) if rng.random() < 0.2 else text)
    return out


def test_gated_scrub_equals_ungated_scrub() -> None:
    """On commands dense in every rule's keywords, scrub() gives exactly what running every
    rule gives (a fixed seed; the fuzz during development ran 400,000 such commands)."""
    corpus = _corpus(6, 6000)
    redacted = 0
    for i, text in enumerate(corpus):
        cut = i % 10 == 0
        expected = ungated_scrub(text, cut)
        assert sc.scrub(text, cut) == expected, text
        redacted += expected != text
    assert redacted > 1000  # the corpus does exercise the rules


@pytest.mark.parametrize("text, expected", [
    ("gh pr view 123 --json title,body --repo example/repo-3",
     "gh pr view 123 --json title,body --repo example/repo-3"),
    ("GH_TOKEN=abc gh api x", "GH_TOKEN=[REDACTED] gh api x"),
    ("echo PA\u017f\u017fWORD=hunter2", "echo PA\u017f\u017fWORD=[REDACTED]"),
    ("curl -u bob:s3cret https://x", "curl -u bob:[REDACTED] https://x"),
    ("curl -sSfu bob:s3cret https://x", "curl -sSfu bob:[REDACTED] https://x"),
    ("curl -H 'X-Vault-Token: s3cret' x", "curl -H 'X-Vault-Token: [REDACTED]' x"),
    ("oc login -u x -p s3cret", "oc login -u x -p [REDACTED]"),
])
def test_exact_values(text: str, expected: str) -> None:
    """A few exact results of the gated scrubber, a clean command among them (returned as
    is), a ``(?i)`` keyword spelled with U+017F among them (its group is looked for in the
    fold)."""
    assert sc.scrub(text) == expected == ungated_scrub(text)


@pytest.mark.parametrize("text, expected", [
    ('curl -d \'{"password": "tr0ub4dor zebra', 'curl -d \'{"password": [REDACTED]'),
    ("python3 -c \"cfg(api_key = 's3cret and", "python3 -c \"cfg(api_key = [REDACTED]"),
    ("ls /nonexistent", "ls [REDACTED]"),
])
def test_exact_values_of_a_cut_text(text: str, expected: str) -> None:
    """A cut text also runs the cut rules; gated and ungated agree."""
    assert sc.scrub(text, cut=True) == expected == ungated_scrub(text, cut=True)


def ungated_normalize(command: str, backend: str, now: float) -> str:
    """normalize() without its gates: every pattern runs."""
    stripper = wrapper_stripper(backend)
    if stripper is not None:
        command = stripper(command)
    command = norm._TMP.sub(norm.TMP, command)
    command = norm._ISO.sub(norm.TS, command)
    low, high = now - 10 * norm._YEAR_S, now + norm._YEAR_S
    command = norm._UNIX.sub(lambda m: norm._unix_time(m, low, high), command)
    return " ".join(command.split())


def test_gated_normalize_equals_ungated_normalize() -> None:
    """The tmp-path needles and the four/ten-digit tests skip only what cannot match."""
    rng = random.Random(7)
    pool = ["/tmp", "/var/tmp", "/tmpx", "a/tmp", "$TMPDIR", "${TMPDIR}", "$TMPDIRX", "TMPDIR",
            "2025-11-30", "2025-11-30T10:00:00Z", "+01:00", "1764500000", "1764500000123",
            "1764500000.5", "17645000001", "9999999999", "\u0661\u0667\u0666\u0664\u0665\u0660"
            "\u0660\u0660\u0660\u0660", "\u0662\u0660\u0662\u0665-11-30", "123", "4567", " ",
            "\t", "\n", "'", "|", "-", ".", ":", "T", "gh pr view"]
    now = 1_764_500_000.0
    for _ in range(20000):
        text = ("" if rng.random() < 0.5 else " ").join(
            rng.choice(pool) if rng.random() < 0.7 else "".join(
                rng.choice(string.digits + "-.:T ") for _ in range(rng.randint(1, 14)))
            for _ in range(rng.randint(1, 10)))
        assert norm.normalize(text, "bash", now) == ungated_normalize(text, "bash", now), text


def test_exclusions_match_as_defined() -> None:
    """matches() is ``command == e or command.startswith(e + " ")`` for some entry e."""
    rng = random.Random(8)
    words = ["gh", "pr", "checks", "run", "watch", "checksum", "x", ""]
    for _ in range(5000):
        entries = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 3)))
                   for _ in range(rng.randint(0, 3))]
        command = " ".join(rng.choice(words) for _ in range(rng.randint(0, 4)))
        ex = Exclusions(entries)
        assert ex.matches(command) == any(command == e or command.startswith(e + " ")
                                          for e in ex.entries)


@pytest.mark.parametrize("text, expected", [
    ("curl https://api.\u017foftlayer.com/soap/v3/" + "a" * 64,
     "curl https://api.\u017foftlayer.com/soap/v3/[REDACTED]"),
    ("tooL ap\u0131_key " + "e" * 33, "tooL ap\u0131_key [REDACTED]"),
])
def test_keywords_spelled_with_unicode_case_variants_are_redacted(text: str, expected: str) -> None:
    """``(?i)`` lets ſ (U+017F) match ``s`` and ı (U+0131) match ``i``; every needle is looked
    for in the fold that maps them, so a keyword spelled with them is gated in, and redacted
    (the needles these rules had before were looked for with ``str.lower()``, which keeps ſ and
    ı, and skipped these commands)."""
    assert sc.scrub(text) == expected
