"""Secrets by the grammar of commands that store one (the follow-ups of issue 27's break-it run):
the argument a command's own documentation names as the secret it sets, whatever its characters.

Each rule of :data:`SETTER_RULES` is a command head (a program and its subcommands, each word
bare or quoted whole, ``'login'``/``"login"``: the shell removes the quotes) and the flags whose
value is the secret:

* ``gh secret set NAME --body VALUE`` (``-b VALUE``, ``-bVALUE``, ``--body=VALUE``);
* ``aws secretsmanager create-secret|put-secret-value|update-secret --secret-string VALUE``
  (also ``--secret-binary``; the whole value goes, a JSON document too), but not a
  ``file://`` or ``fileb://`` value (a file the CLI reads);
* ``aws ssm put-parameter --value VALUE``, unless ``--type String`` or ``--type StringList``
  says the parameter is plain (``SecureString``, or no type, goes);
* ``az keyvault secret set --value VALUE``;
* ``kubectl|oc create secret generic --from-literal KEY=VALUE`` (every one of them, ``=`` or a
  blank after the flag): the key stays, the value goes;
* ``doctl auth init -t VALUE`` (``--access-token``);
* ``twine upload|register -p VALUE`` (``--password``);
* ``unzip -P VALUE`` (``-PVALUE``, also after switches: ``-qP VALUE``);
* ``vault kv put|patch PATH KEY=VALUE ...``: every value of the data written to Vault's
  key/value engine (the key stays; a ``@FILE`` or ``-``, read from a file or standard input,
  stays).

Program options may stand between the program and its subcommands (``aws --region eu-west-1
ssm ...``, ``kubectl -n jobs create secret generic ...``). A value that is a ``$VAR``, a command
substitution, a file's ``@PATH`` or already ``[REDACTED]`` stays (:func:`value_is_secret`).
What is piped or here-string'd into a command that reads its secret from standard input
(``gh secret set NAME``, ``sudo -S``, ``chpasswd``) is the credential readers' rule of
:mod:`repeat_failure.rules.scrub_context`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from repeat_failure.rules.scrub_names import REDACTED, SECRET, value_is_secret


def word(alternatives: str) -> str:
    """A regular expression for one shell word of ``alternatives`` (a regular expression), bare
    or quoted whole (``login``, ``'login'``, ``"login"``)."""
    return rf"""(?:(?:{alternatives})|'(?:{alternatives})'|"(?:{alternatives})")"""


#: Program options before a subcommand: ``-x``, ``--name=value``, ``--name value`` (four at
#: most).
_OPTIONS = r"(?:[ \t]+-[\w-]+(?:=[^\s|;&<>]*|[ \t]+[^\s|;&<>'\"-][^\s|;&<>]*)?){0,4}?"
#: The rest of the simple command: quoted parts whole (a ``;`` or ``|`` inside quotes is no
#: end), up to ``| ; & newline`` or an unquoted ``)`` or backquote (the end of a ``$(...)``,
#: a subshell or a backquoted command: ``x=$(gh secret set N -b T)`` keeps its ``)``).
_REST = r"""(?P<rest>(?:'[^']*'|"(?:\\.|[^"\\])*"|\\.|[^|;&\n'"\\)`])*)"""
#: One argument of the rest (a quote left open runs to the end).
_ARG = re.compile(r"""(?:'[^']*'?|"(?:\\.|[^"\\])*"?|\\.|[^\s'"\\<>)`])+""")
_FILE_VALUE = re.compile(r"""["']?fileb?://""")
_PLAIN_TYPES = frozenset({"String", "StringList"})


def _plain_type(args: list[str]) -> bool:
    """Whether the arguments (quotes removed) give ``--type String`` or ``--type StringList``
    (``--type=String`` too): an argument of its own, not words inside another's value
    (``--description '--type String'``)."""
    for i, arg in enumerate(args):
        if arg.startswith("--type="):
            if arg[7:] in _PLAIN_TYPES:
                return True
        elif arg == "--type" and i + 1 < len(args) and args[i + 1] in _PLAIN_TYPES:
            return True
    return False


def _head(program: str, *subcommands: str) -> str:
    out = r"(?<![\w.$-])" + word(program)
    for sub in subcommands:
        out += _OPTIONS + r"[ \t]+" + word(sub)
    return out + r"(?![\w-])"


def _whole(value: str) -> str:
    """``value`` (one shell word) redacted whole unless it names a file or holds no secret."""
    if not value or _FILE_VALUE.match(value) or not value_is_secret(SECRET, value) \
            or _unquoted(value) == "{}":  # xargs -I{} / find -exec: filled in from elsewhere
        return value
    return REDACTED


def _literal(value: str) -> str:
    """``KEY=VALUE`` (quoted whole or not) with the value redacted, the key kept."""
    quote = value[0] if value[:1] in ("'", '"') else ""
    eq = value.find("=")
    if eq < 0:
        return _whole(value)
    head, secret, close = value[: eq + 1], value[eq + 1:], ""
    if quote and secret.endswith(quote) and secret.count(quote) == 1:
        secret, close = secret[:-1], quote
    if not secret or not value_is_secret(SECRET, secret):
        return value
    return head + REDACTED + close


def _vault_pair(value: str) -> str:
    """``KEY=VALUE`` of ``vault kv put`` with the value redacted (:func:`_literal`), unless it is
    ``-`` (Vault reads the value from standard input)."""
    return value if _unquoted(value).partition("=")[2] == "-" else _literal(value)


def _unquoted(text: str) -> str:
    return text.replace("'", "").replace('"', "")


def _value_part(arg: str, start: int, redact: Callable[[str], str]) -> str:
    """``arg`` with its part from ``start`` on redacted; a quote that opened the whole argument
    (``'--body=VALUE'``) stays closed."""
    value, close = arg[start:], ""
    if arg[:1] in ("'", '"') and value.endswith(arg[0]) and value.count(arg[0]) == 1:
        value, close = value[:-1], arg[0]
    new = redact(value)
    return arg if new == value else arg[:start] + new + close


def _short_value(bare: str, shorts: frozenset[str], bools: frozenset[str]) -> int:
    """Where the secret flag stands in a cluster of single-letter flags (``-qP``: 2, ``-P``: 1;
    its value is what follows it, or the next argument): a letter of ``shorts`` after none or
    more of ``bools`` (switches that take no value); -1 when there is none."""
    if len(bare) < 2 or bare[0] != "-" or bare[1] == "-":
        return -1
    for i in range(1, len(bare)):
        if bare[i] in shorts:
            return i
        if bare[i] not in bools:
            return -1
    return -1


def setter_values(longs: frozenset[str], shorts: frozenset[str], redact: Callable[[str], str],
                  plain: Callable[[list[str]], bool] | None = None,
                  bools: frozenset[str] = frozenset(),
                  pairs: Callable[[str], str] | None = None) -> Callable[[re.Match[str]], str]:
    """The replacement of a secret-setting command's rule: in group ``rest`` (the command's
    arguments after its head), the value of every flag of ``longs`` (``--name VALUE``,
    ``--name=VALUE``) and of ``shorts`` (a single letter: ``-x VALUE``, ``-xVALUE``, also after
    switches of ``bools`` in one cluster: ``unzip -qP VALUE``) goes through ``redact`` (the
    value's new text); with ``pairs``, every argument ``KEY=VALUE`` that is no flag goes through
    it too (``vault kv put PATH KEY=VALUE``). The match stays as it is when ``plain`` says the
    arguments (quotes removed) set no secret (``--type String``), and the walk stops at a
    redirection."""
    def replace(m: re.Match[str]) -> str:
        rest = m["rest"]
        if plain is not None and plain([_unquoted(a[0]) for a in _ARG.finditer(rest)]):
            return m[0]
        out, pos, last, pending = [], 0, 0, False
        for a in _ARG.finditer(rest):
            gap = rest[last:a.start()]
            if "<" in gap or ">" in gap:
                break
            last = a.end()
            arg, new = a[0], None
            bare = _unquoted(arg)
            at = _short_value(bare, shorts, bools) if shorts else -1
            if pending:
                new, pending = redact(arg), False
            elif bare.startswith("--"):
                name, eq, _ = bare.partition("=")
                if name in longs:
                    if eq:
                        new = _value_part(arg, arg.index("=") + 1, redact)
                    else:
                        pending = True
            elif at > 0:
                if len(bare) > at + 1:
                    new = _value_part(arg, arg.index(bare[at]) + 1, redact)
                else:
                    pending = True
            elif pairs is not None and not bare.startswith("-") and "=" in bare:
                new = pairs(arg)
            if new is not None and new != arg:
                out.append(rest[pos:a.start()])
                out.append(new)
                pos = a.end()
        if not out:
            return m[0]
        out.append(rest[pos:])
        return m[0][: m.start("rest") - m.start()] + "".join(out)
    return replace


def _rule(head: str, longs: set[str], shorts: set[str], redact: Callable[[str], str],
          *needles: str, plain: Callable[[list[str]], bool] | None = None, bools: str = "",
          pairs: Callable[[str], str] | None = None) -> tuple:
    """A rule of :data:`SETTER_RULES`: ``head`` then the rest of the simple command; each of
    ``needles`` (case-sensitive) must be in the text for the rule to run (``plain``, ``bools``,
    ``pairs``: :func:`setter_values`)."""
    return (re.compile(head + _REST),
            setter_values(frozenset(longs), frozenset(shorts), redact, plain, frozenset(bools),
                          pairs),
            *(((n,), 0) for n in needles))


#: unzip's switches that take no value (its manual: ``-qP PASSWORD`` is ``-q -P PASSWORD``);
#: ``-d`` and ``-x`` take one, so a ``P`` after them is no password flag.
_UNZIP_SWITCHES = "abcfhjlnopqstuvzBCDKLMNOTUVWX^12$:"


#: (pattern, replacement, needs groups...) as in :data:`repeat_failure.rules.scrub_rules.RULES`.
SETTER_RULES: tuple[tuple, ...] = (
    _rule(_head("gh", "secret", "set"), {"--body"}, {"b"}, _whole, "secret", "set"),
    _rule(_head("aws", "secretsmanager", "create-secret|put-secret-value|update-secret"),
          {"--secret-string", "--secret-binary"}, set(), _whole, "secretsmanager"),
    _rule(_head("aws", "ssm", "put-parameter"), {"--value"}, set(), _whole, "put-parameter",
          plain=_plain_type),
    _rule(_head("az", "keyvault", "secret", "set"), {"--value"}, set(), _whole, "keyvault"),
    _rule(_head("kubectl|oc", "create", "secret", "generic"), {"--from-literal"}, set(),
          _literal, "generic", "--from-literal"),
    _rule(_head("doctl", "auth", "init"), {"--access-token"}, {"t"}, _whole, "doctl"),
    _rule(_head("twine", "upload|register"), {"--password"}, {"p"}, _whole, "twine"),
    _rule(_head("unzip"), set(), {"P"}, _whole, "unzip", "P", bools=_UNZIP_SWITCHES),
    _rule(_head("vault", "kv", "put|patch"), set(), set(), _whole, "vault", pairs=_vault_pair),
)
