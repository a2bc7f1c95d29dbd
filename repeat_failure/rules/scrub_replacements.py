"""How a scrub rule's match is replaced when the match alone does not decide: the
replacements of :data:`repeat_failure.rules.scrub_rules.RULES` that keep context (a flag, a
user name, a key) and redact only the value, or read the name first
(:mod:`repeat_failure.rules.scrub_names`) and keep the match when it says nothing secret.

Each replacement takes a :class:`re.Match` and returns the match's new text (the match itself
when nothing goes), except :func:`shell_assignments`, which takes the pattern and the whole text
(its ``whole_text`` attribute says so to :func:`repeat_failure.rules.scrub.apply_rule`). None
raises for any match of its rule's pattern.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import re
from collections.abc import Callable

from repeat_failure.rules.scrub_context import generic_tokens, looks_random
from repeat_failure.rules.scrub_engine import scrub_text
from repeat_failure.rules.scrub_names import (
    NOT_SECRET, ODD, REDACTED, SECRET, VENDOR, is_reference, name_kind, value_is_secret)


def secret_assignment(name_group: int, value_group: int) -> Callable[[re.Match[str]], str]:
    """A replacement redacting group ``value_group`` when group ``name_group`` says secret
    (:func:`name_kind`, :func:`value_is_secret`); the match is kept as it is otherwise."""
    def replace(m: re.Match[str]) -> str:
        value = m[value_group]
        if not value_is_secret(name_kind(m[name_group]), value):
            return m[0]
        start, end = m.start(value_group) - m.start(), m.end(value_group) - m.start()
        return m[0][:start] + REDACTED + m[0][end:]
    return replace


def assignment(m: re.Match[str]) -> str:
    """The replacement of the catch-all assignment rule: the value goes when the name says secret. A
    ``,`` separates a name and a value only when both are quoted and they open a call's
    arguments (``setProperty("X_TOKEN", "v")``) or the value is token-shaped (in a list,
    ``["auth","batch"]`` is two words); after a bare ``name:`` an unquoted value must end the line or the quoted text (a
    YAML line; ``auth: fix token refresh`` is prose). A word between the name and the operator
    is a type (``var xToken string = v``) or, after a keyword, the name (``const xToken = v``):
    either may say secret. An unquoted value that is called (``token = get_token()``) or an
    attribute path (:data:`_ATTRIBUTE_PATH`) is code, no literal, and stays; so does
    kubectl's ``--from-file=KEY=PATH`` (:func:`_names_a_file`)."""
    value, op = m["value"], m["op"].strip()
    quoted = value[0] in "\"'`"
    if op == "," and not (m["q"] and quoted and (
            m.string[:m.start()].rstrip().endswith("(") or value_is_secret(VENDOR, value))):
        return m[0]  # in a list, "name", "value" needs a token-shaped value
    if op == ":" and not quoted and not m["q"] and not _LINE_END.match(m.string, m.end()):
        return m[0]
    if _names_a_file(m.string, m.start()):
        return m[0]
    kind = name_kind(m["name"])
    if kind != SECRET and m["word"]:  # "const NAME = v": the name is the second word
        kind = max(kind, name_kind(m["word"]))
    if kind == NOT_SECRET and m["name"].lower() in _BARE_KEYS and looks_random(value):
        kind = SECRET  # key = "<random>": a bare key's random-looking value (issue 27)
    if not value_is_secret(kind, value):
        return m[0]
    if not quoted and (m.string.startswith("(", m.end()) or _ATTRIBUTE_PATH.fullmatch(value)):
        return m[0]  # code: a call (token = get_token()) or an attribute (process.env.TOKEN)
    if m["word"] and looks_random(m["word"]):
        # "name: <random>=<random>": no type word but the head of the value (issue 27).
        return m[0][: m.start("word") - m.start()] + REDACTED
    return m[0][: m.start("value") - m.start()] + REDACTED


#: Names that say nothing alone (AWS's ``Key=name``, a map's key) but hold a secret when their
#: value looks random (:func:`repeat_failure.rules.scrub_context.looks_random`).
_BARE_KEYS = frozenset({"key", "keys"})


#: An attribute path in code (``process.env.NPM_TOKEN``, ``settings.SECRET_KEY``): a lower-case
#: object's name and one or more attributes; a value, not a literal secret.
_ATTRIBUTE_PATH = re.compile(r"[a-z_$][a-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+")


#: A text's quoted parts (``'...'``; ``"..."`` with its backslash escapes; group 1 or 2 is the
#: closing quote when there is one) and, outside quotes, backslash escapes and other runs.
_QUOTED_PART = re.compile(r"""'[^']*(')?|"(?:\\.|[^"\\])*(")?|\\.|[^'"\\]+""", re.S)


@functools.lru_cache(maxsize=8)
def _closed_quotes(text: str) -> tuple[list[int], list[int]]:
    """The opening quotes' positions in ``text`` (ascending) and, for each, its closing quote's
    position, or -1 when the text ends inside the quoted part (shell quoting, POSIX 2.2)."""
    starts: list[int] = []
    closes: list[int] = []
    for q in _QUOTED_PART.finditer(text):
        if q[0][0] in "'\"":
            starts.append(q.start())
            closes.append(q.end() - 1 if q.lastindex else -1)
    return starts, closes


#: The ``NAME=`` of a shell assignment (group 1 the name); its rule's pattern adds the word.
SHELL_NAME = (r"(?<![A-Za-z0-9_])(?<!--)([A-Za-z_" + ODD + r"][A-Za-z0-9_" + ODD + r"]{0,127})="
               r"(?!\[REDACTED\])")
_SHELL_NAME_RE = re.compile(SHELL_NAME)


def _names_a_file(text: str, start: int) -> bool:
    """Whether the ``KEY=PATH`` at ``start`` of ``text`` is kubectl's ``--from-file`` (or
    ``--from-env-file``) value: ``KEY`` names the Secret's key, ``PATH`` a file (kubectl create
    secret generic's documented form)."""
    return text.endswith(("--from-file=", "--from-file ", "--from-env-file="), 0, start)


def shell_assignments(pattern: re.Pattern[str], text: str) -> str:
    """``text`` with the value of each ``NAME=value`` of ``pattern`` (group 1 the name, 2 the
    shell word after ``=``) redacted when the name says secret (:func:`value_is_secret`).

    An assignment inside a quoted word (``curl -d 'password=v' URL``, ``sh -c "TOKEN=v"``)
    ends at that word's closing quote: the quote closes, it opens nothing, so what follows it
    (the URL) stays and is searched again. ``pattern`` must begin with :data:`SHELL_NAME`.
    A ``KEY=PATH`` of kubectl's ``--from-file`` (and
    ``--from-env-file``) names a file, no secret. Linear in the text's length (one search from
    where the last value ended, one bisection into the quoted parts per assignment; 4 KB of
    ``'TOKEN=x' `` pairs take 3 ms)."""
    starts, closes = _closed_quotes(text)
    out: list[str] = []
    pos = search = 0  # pos: copied up to here; search: look for the next name from here
    while (name := _SHELL_NAME_RE.search(text, search)) is not None:
        start = name.start()
        i = bisect.bisect_left(starts, start) - 1
        # Inside a quoted word the value may not pass its closing quote (the search stops
        # there, so a text of many quoted assignments stays linear).
        inside = i >= 0 and start < closes[i]
        m = pattern.match(text, start, closes[i] if inside else len(text))
        if m is None:  # no word after "=" (or the closing quote right after it)
            search = name.end()  # (the text before it is still to be copied: issue 27)
            continue
        vstart, vend = m.span(2)
        value = text[vstart:vend]
        kind = NOT_SECRET if _names_a_file(text, start) else name_kind(m[1])
        out.append(text[pos:vstart])
        out.append(REDACTED if value and value_is_secret(kind, value) else value)
        pos = search = max(vend, m.end(1) + 1)
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


shell_assignments.whole_text = True  # type: ignore[attr-defined]

#: What may follow the value of a bare ``name: value``: the end of the line or of the text, a
#: closing quote, an escaped newline (not ``,`` or ``}``: ``jq '{key: .name}'`` is no secret).
_LINE_END = re.compile(r"[ \t]*(?:$|[\n\r'\"`]|\\[nr])", re.M)


#: Commands whose bare ``--secret`` names a secret rather than giving one (``gcloud secrets
#: ... --secret=NAME``, BuildKit's ``docker build --secret id=NAME,src=FILE``).
_SECRET_BY_NAME = re.compile(r"\s*(?:gcloud|docker|podman|buildah|nerdctl|buildctl)\b")


def flag_value(m: re.Match[str]) -> str:
    """The replacement of the ``--flag value`` rule: the value goes when the flag's name says
    secret (:func:`name_kind`), but not a bare ``--secret`` of :data:`_SECRET_BY_NAME`."""
    if m[1].lower() == "--secret" and _SECRET_BY_NAME.match(m.string):
        return m[0]
    quote = m.string[m.start(1) - 1] if m.start(1) else ""
    if quote in "'\"" and quote and m[2] == "=" and quote in m[3]:
        # a flag quoted whole ('--token=abc' y): its value ends at that quote; the value pattern
        # took the closing quote for an opening one and ran to the end of the text
        value, rest = m[3].split(quote, 1)
        if not value_is_secret(name_kind(m[1]), value):
            return m[0]
        return m[1] + m[2] + REDACTED + quote + rest
    return secret_assignment(1, 3)(m)


#: RFC 7617's Basic credential, user-id ":" password (a URL's "scheme://..." is none).
_BASIC_CREDENTIAL = re.compile(r"[\x21-\x39\x3b-\x7e]{1,64}:(?!//)[\x21-\x7e]{6,}")


def encoded_secret(m: re.Match[str]) -> str:
    """The replacement of the base64 rule: a generic vendor token in the word goes
    (:func:`repeat_failure.rules.scrub_context.generic_tokens`); a word that decodes (standard or URL-safe
    alphabet) to printable ASCII holding a secret (what :func:`repeat_failure.rules.scrub.scrub`
    redacts, or a Basic ``user:password``) goes whole; any other word stays. gitleaks decodes base64 before it
    looks (``--max-decode-depth``, 5 by default), so a token base64-encoded is still a leak."""
    word = m[0]
    generic = generic_tokens(word)
    if generic != word:  # the generic vendor-token shape (issue 27)
        return generic
    padded = word.rstrip("=") + "=" * (-len(word.rstrip("=")) % 4)
    try:
        decoded = base64.b64decode(padded, altchars=b"-_" if ("-" in word or "_" in word)
                                   else None, validate=True)
    except (binascii.Error, ValueError):
        return word
    if not decoded.isascii():
        return word
    text = decoded.decode("ascii")
    if not text.strip() or not text.replace("\n", "").replace("\t", "").isprintable():
        return word
    # The engine through its leaf module: scrub's rule table holds this replacement.
    if _BASIC_CREDENTIAL.fullmatch(text.strip()) or scrub_text(text) != text:
        return REDACTED
    return word


_K8S_SECRET_KIND = re.compile(r"(?i)\bkind:[ \t]*[\"']?secret\b")
_DATA_ENTRY = re.compile(r"([ \t]*[\"']?[\w.-]+[\"']?:)([ \t]*)(.*)")
_BLOCK_INDICATORS = frozenset({"", "|", ">", "|-", ">-", "|+", ">+"})


def secret_data(m: re.Match[str]) -> str:
    """The replacement of the Kubernetes Secret rule: in a text that declares ``kind: Secret``,
    every value under ``data:``/``stringData:`` goes (base64 or not, block scalars line by
    line); the keys and comments stay. Any other ``data:`` block stays."""
    if not _K8S_SECRET_KIND.search(m.string):
        return m[0]
    out = []
    for line in m[3].split("\n"):
        stripped = line.strip()
        entry = _DATA_ENTRY.fullmatch(line)
        if not stripped or stripped.startswith("#") or stripped.startswith(REDACTED):
            out.append(line)
        elif entry is None:  # a line of a block scalar
            out.append(line[: len(line) - len(line.lstrip())] + REDACTED)
        elif entry[3].strip() in _BLOCK_INDICATORS or entry[3].startswith(REDACTED):
            out.append(line)
        else:
            out.append(entry[1] + entry[2] + REDACTED)
    return m[1] + "\n".join(out)


def header_value(m: re.Match[str]) -> str:
    """The replacement of the credential-header rule: the value goes (a scheme word before it
    stays), unless it is a bare ``$VAR`` (``Authorization: Bearer $TOKEN``)."""
    if is_reference(m[0].split()[-1]):
        return m[0]
    return f"{m[1]}{m[2]}{m[3] + ' ' if m[3] else ''}{REDACTED}"


def keep_user(sep: str) -> Callable[[re.Match[str]], str]:
    """The replacement of a :func:`_user_password` rule: the password goes, the user stays; a
    password given as a bare ``$VAR`` (:func:`is_reference`) stays too."""
    def replace(m: re.Match[str]) -> str:
        if is_reference(m[0][m.end(3) - m.start() + len(sep):]):
            return m[0]
        return f"{m[1]}{m[2] or ''}{m[3]}{sep}{REDACTED}"
    return replace


def keep(*groups: int) -> Callable[[re.Match[str]], str]:
    """A replacement keeping the given groups (context) and redacting the rest of the match;
    when the groups are one prefix of the match and the rest is a bare ``$VAR``
    (:func:`is_reference`: ``docker login -p $PW``, ``mysql -p$MYSQL_PW``), all stays."""
    def replace(m: re.Match[str]) -> str:
        if len(groups) == 1 and m.start(groups[0]) == m.start() \
                and is_reference(m[0][m.end(groups[0]) - m.start():]):
            return m[0]
        return "".join(m[g] or "" for g in groups) + REDACTED
    return replace
