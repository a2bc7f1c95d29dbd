"""Secrets by the command's own grammar (issue 27): values that nothing about their characters
marks as secret, but whose place in the command does, and the generic vendor-token shape.

The rules of :data:`CONTEXT_RULES` (run by :func:`repeat_failure.rules.scrub.scrub` among
:data:`repeat_failure.rules.scrub_rules.RULES`, before the rules that read names):

* what ``echo``/``printf`` pipe into a credential reader (:data:`_READER`: ``--with-token``,
  ``--password-stdin``, ``--token-stdin`` ...; a command that reads its secret there, ``gh
  secret set NAME``, ``sudo -S``, ``chpasswd``; or a ``login`` subcommand) goes whole:
  ``echo <tok> | gh auth login --with-token``; piped into ``tee`` of a credentials-like file,
  its random-looking words go;
* a here-string (``<<<``) of a command that reads a credential or writes a credentials-like
  file, and a here-document's body when its first line does (``gh auth login --with-token
  <<'EOF'``, ``cat <<EOF | docker login --password-stdin``, ``cat > ~/.netrc <<EOF``): for a
  reader the whole text goes, for a file every word taken for a credential
  (:func:`credential_word`);
* ``echo``/``printf`` writing to a credentials-like file (:data:`CRED_FILE`: ``.netrc``,
  ``.npmrc``, ``.pypirc``, ``.git-credentials``, ``*.env``, ``.env.*``, ``credentials``,
  ``token`` and ``*.token`` files, ``*secret*``, anything under ``~/.config/<vendor>/`` or
  ``~/.aws/``, ``~/.docker/config.json``, ``~/.kube/config``, ``*kubeconfig*``): every word of what they write that is taken for a credential goes (eight or
  more characters with a digit, a capital or a symbol: :func:`credential_word`);
* the arguments of a ``login`` subcommand (``<cli> [sub] login ...``, also quoted in an error
  message; each of its words bare or quoted whole, ``somecli 'login'``, as the shell reads it): the first positional argument of eight characters or more goes unless it is a
  host, a URL, an e-mail address, a path, a plain word or a ``$VAR``; a flag's value goes when
  it looks random (not a UUID);
* ``Pwd=``/``Password=`` in a connection string (``;``-separated, ADO.NET/ODBC/JDBC) and
  Oracle's ``jdbc:oracle:thin:user/password@host``;
* the generic vendor-token shape, needing no list of vendors (:data:`GENERIC_TOKEN`): a short
  lower-case prefix of one to three parts, each followed by ``_`` or ``-``, then a body of 20 or
  more letters and digits (``_`` and ``-`` may stand between them) whose longest part (16 or
  more) looks random (:func:`looks_random`) and is no hexadecimal run
  (a SHA or a UUID's tail: ``sha-<40 hex>``, ``pr-<sha>`` stay); found by the base64 rule's scan of every long
  word (:func:`repeat_failure.rules.scrub_replacements.encoded_secret`), so it costs no scan of
  its own.

Random-looking (:func:`looks_random`) is about the characters' classes: letters and digits
mixed with short runs of each class (a random token's lower-case, capital and digit runs are
one or two characters long on average; a word, a version, a path or a camelCase name has long
runs), never a UUID, a path of words, a host or an e-mail address. Git SHAs, UUIDs, image
digests and checksums in ordinary positions are never looked at by these rules: only what a
credential reader reads, what a credentials-like file receives and a login's arguments are.
"""

from __future__ import annotations

import re

from repeat_failure.rules.scrub_names import REDACTED, SECRET, is_reference, value_is_secret
from repeat_failure.rules.scrub_setters import word

# --- what looks random ----------------------------------------------------------------------------

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HOST = re.compile(r"(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,24}\.?(?::[0-9]{1,5})?(?:/[\w./-]*)?"
                   r"|[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?::[0-9]{1,5})?")
_EMAIL = re.compile(r"[\w.+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,24}")
_PATH = re.compile(r"(?:~|\.{1,2}|\$HOME|\$\{HOME\})?/?(?:[\w.@-]+/)+[\w.@-]*|(?:~|\.{1,2})/?")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,20}://\S*")
_CLASS_RUN = re.compile(r"[a-z]+|[A-Z]+|[0-9]+")
_HEX = re.compile(r"[0-9a-f]+|[0-9A-F]+")


def _unquote(word: str) -> str:
    if len(word) >= 2 and word[0] == word[-1] and word[0] in "\"'":
        return word[1:-1]
    return word


def looks_random(word: str) -> bool:
    """Whether ``word`` (quoted or not) looks like a random credential: eight or more
    letters and digits, both of them (or capitals, small letters and a symbol), with short
    runs of each character class (the mean run of small letters, capitals and digits at most
    2.6 characters, or 4 for 24 or more small letters and digits with a digit in eight; a
    word, ``v1.2.3``, ``python3.11-slim``, ``getUserToken2`` have longer ones); letters alone
    when their runs are that short and capitals come in a run of two or more somewhere
    (``yqDVtkqPECriaLRi``; not camelCase). Never a UUID, a host, an e-mail address, a URL, a
    ``$VAR`` or a path of words (``reports/2024/q1.csv``)."""
    w = _unquote(word)
    if len(w) < 8 or any(c.isspace() for c in w) or _UUID.fullmatch(w) or _HOST.fullmatch(w) \
            or _EMAIL.fullmatch(w) or _URL.fullmatch(w) or is_reference(w):
        return False
    if _PATH.fullmatch(w) and not any(looks_random(part) for part in w.split("/") if part):
        return False
    runs = _CLASS_RUN.findall(w)
    chars = sum(len(r) for r in runs)
    if chars < 8:
        return False
    digits = sum(len(r) for r in runs if r[0].isdigit())
    has_upper = any(r[0].isupper() for r in runs)
    has_lower = any(r[0].islower() for r in runs)
    symbols = any(not c.isalnum() and c not in "._-/:@" for c in w)
    mean = chars / len(runs)
    if digits == 0 and has_upper and has_lower and not symbols:
        # Letters only: random when the runs are short and capitals come in runs too
        # (camelCase has single capitals before runs of small letters: dropboxToken).
        return mean <= 2.6 and any(r[0].isupper() and len(r) >= 2 for r in runs)
    if not (0 < digits < chars or (has_upper and has_lower and symbols)):
        return False
    # Long words of small letters and digits only have longer runs (26 letters to 10 digits).
    return mean <= 2.6 or (chars >= 24 and digits * 8 >= chars and mean <= 4)


# --- credentials-like files and readers --------------------------------------------------------

#: A credentials-like file's path (what ``>``, ``>>`` or ``tee`` write to).
CRED_FILE = (r"""["']?(?:(?:~|\$HOME|\$\{HOME\})["']?)?"""
             r"""(?:[^\s;&|<>'"()]*/\.config/[^\s;&|<>'"()/]+/"""
             r"""[^\s;&|<>'"()]+"""
             r"""|(?:[^\s;&|<>'"()]*/)?(?:\.?netrc|_netrc|\.npmrc|\.pypirc|\.yarnrc(?:\.yml)?"""
             r"""|\.git-credentials|\.dockercfg|\.pgpass|\.s3cfg|\.boto|\.env(?:\.[\w-]+)?"""
             r"""|[\w.-]+\.env|[\w.-]*(?:credentials?|creds|tokens?|secrets?|passwords?|passwd"""
             r"""|apikey|api[_-]key)(?:\.[A-Za-z0-9]+)?|[\w.-]+\.(?:token|secret|password)"""
             r"""|\.aws/[\w.-]+|(?:\.docker|\$\{?DOCKER_CONFIG\}?)/config\.json|\.kube/config"""
             r"""|[\w.-]*kubeconfig(?:\.[A-Za-z0-9]+)?|\$\{?KUBECONFIG\}?))["']?(?=[\s;&|)'"]|\Z)""")
#: Flags by which a command reads a credential from its standard input, and commands that read
#: one there by their grammar: ``gh secret set NAME`` (no ``--body``: the value is read from
#: standard input), ``sudo -S``/``--stdin`` (the password, before the command's own input; only
#: among sudo's options, so ``sudo pacman -S pkg`` is none), ``chpasswd`` (``user:password``
#: lines), ``passwd --stdin`` and ``aws secretsmanager ... --secret-string file:///dev/stdin``.
_READER = (r"--(?:with-token|password-stdin|token-stdin|secret-stdin|stdin-password"
           r"|api-key-stdin|key-stdin)\b"
           r"|(?<![\w./$-])(?:gh|'gh'|\"gh\")[ \t]+(?:secret|'secret'|\"secret\")[ \t]+"
           r"(?:set|'set'|\"set\")(?![\w-])"
           r"|(?<![\w.$-])sudo(?:[ \t]+(?:-[A-Za-z]*[ugpCDhRTU]|--(?:user|group|prompt|chdir|host"
           r"|chroot|close-from|command-timeout|other-user))[ \t]+[^\s|;&<>]+"
           r"|[ \t]+--?[A-Za-z][\w-]*(?:=[^\s|;&<>]*)?)*?[ \t]+(?:-[A-Za-z]*S[A-Za-z]*|--stdin)"
           r"(?![\w-])"
           r"|(?<![\w.$-])chpasswd(?![\w-])|(?<![\w.$-])passwd[ \t][^|;&\n]*--stdin\b"
           r"|--secret-(?:string|binary)(?:=|[ \t]+)[\"']?(?:fileb?://)?/dev/stdin\b"
           # xargs appending what it reads to a command that ends in a secret flag, or putting
           # it where the flag's value is `{}` (-I{}):
           # `echo T | xargs aws secretsmanager create-secret --name n --secret-string`.
           r"|(?<![\w.$-])xargs(?![\w-])[^|;&\n]*?[ \t](?:--(?:secret-string|secret-binary"
           r"|password|docker-password|access-token|body)|(?:put-parameter|keyvault)"
           r"[^|;&\n]*?[ \t]--value)(?:[ \t]*(?=[|;&\n]|\Z)|(?:=|[ \t]+)[\"']?\{\}[\"']?"
           r"(?![^\s|;&]))")
#: Where a simple command (one without ``| ; & newline``) reads a credential from its input
#: (:data:`_READS`) or writes a credentials-like file (:data:`_WRITES`: ``>``, ``>>``, ``tee``).
_READS = re.compile(_READER)
_WRITES = re.compile(r"(?:(?:&>>?|>\||>>?)[ \t]*|\btee\b(?:[ \t]+-[a-z]+)*[ \t]+(?:[^\s|;&<>]+[ \t]+)*?)"
                     + CRED_FILE)
#: A word of what a command writes: runs between blanks, quotes, ``=`` ``,`` ``;``.
_DATA_WORD = re.compile(r"""[^\s'"=,;]+""")
#: Words of what a command writes joined by ``=`` (``KEY=VALUE``, ``a=b=c``).
_JOINED_WORD = re.compile(r"""[^\s'",;]+""")


#: A YAML key before its value (``apiVersion:``, ``current-context:``): a name, no credential,
#: unless it looks random (a kubeconfig written with a here-document keeps its keys).
_KEY_WORD = re.compile(r"[A-Za-z_][\w.-]*:")


def credential_word(word: str) -> bool:
    """Whether ``word``, written to a credentials-like file, is taken for a credential: eight
    characters or more with a digit or a symbol (a UUID, a ``user:password``, a hexadecimal run
    too), or letters that look random (:func:`looks_random`; not a name such as
    ``dropboxToken``); but no host, URL, e-mail address, path of plain words, plain word
    (``production``, ``eu-west-1``), key before its value (``apiVersion:``), number of up to 11
    digits or ``$VAR``."""
    if len(word) < 8 or word.startswith(REDACTED) or not value_is_secret(SECRET, word) \
            or _KEY_WORD.fullmatch(word) and not looks_random(word[:-1]):
        return False
    if _HOST.fullmatch(word) or _URL.fullmatch(word) or _EMAIL.fullmatch(word) \
            or _PLAIN_WORD.fullmatch(word) and not _HEX.fullmatch(word):
        return False
    if _PATH.fullmatch(word) and not looks_random(word):
        return False
    if word.isdigit():
        return len(word) >= 12
    if not any(c.isalpha() for c in word):
        return False
    if _HEX.fullmatch(word) or any(c.isdigit() for c in word) \
            or any(not c.isalnum() and c not in "_.-[](){}<>" for c in word):
        return True
    # Letters only (and _ . - brackets): a name (dropboxToken, API_KEY, [pypi]) unless it
    # looks random.
    return looks_random(word)


def random_words(text: str) -> str:
    """``text`` written to a credentials-like file, with every word of it that is taken for a
    credential (:func:`credential_word`; words end at blanks, quotes, ``= , ;``, an escaped
    newline ``\\n`` and a ``[REDACTED]`` an earlier rule wrote: ``:[REDACTED]}}}`` keeps its
    JSON) redacted."""
    def one(m: re.Match[str]) -> str:
        out = []
        for part in re.split(r"(\\[nrt]|\[REDACTED\])", m[0]):
            out.append(REDACTED if credential_word(part) else part)
        return "".join(out)

    def joined(m: re.Match[str]) -> str:
        # KEY=VALUE where the value holds ``=`` (a token of base64's or a vendor's alphabet:
        # ``b_y=b0z=7oy6…``): when a credential word follows the first ``=``, everything after
        # it goes, so no piece of the value is left beside the placeholder
        out = []
        for seg in re.split(r"(\\[nrt])", m[0]):  # a line of printf's '...\n...' at a time
            key, _, value = seg.partition("=")
            if "=" in value.rstrip("=") and any(credential_word(w) for w in value.split("=")):
                out.append(_DATA_WORD.sub(one, key) + "=" + REDACTED)
            else:
                out.append(_DATA_WORD.sub(one, seg))
        return "".join(out)
    return _JOINED_WORD.sub(joined, text)


def _whole(value: str) -> str:
    """``value`` redacted whole unless it is a ``$VAR``, a substitution, a switch or empty."""
    stripped = value.strip()
    if not stripped or not value_is_secret(SECRET, stripped):
        return value
    return value[: len(value) - len(value.lstrip())] + REDACTED \
        + value[len(value.rstrip()):]


def piped_into_reader(m: re.Match[str]) -> str:
    """The replacement of the echo-into-a-reader rule: group ``data`` (what ``echo``/``printf``
    print) goes whole when the command after the pipe reads a credential (:data:`_READS`, or a
    ``login`` subcommand), its credential words when it writes a credentials-like file."""
    if _READS.search(m["after"]) or _LOGIN_HEAD.search(m["after"]):
        return m["head"] + _whole(m["data"]) + m["after"]
    if _WRITES.search(m["after"]):
        return m["head"] + random_words(m["data"]) + m["after"]
    return m[0]


def here_string(m: re.Match[str]) -> str:
    """The replacement of the here-string rule: the word after ``<<<`` goes whole for a
    credential reader, its credential words (:func:`credential_word`) for a credentials-like
    file."""
    head, word, rest = m["head"], m["word"], m["rest"] or ""
    piped = rest[rest.index("|"):] if "|" in rest else ""  # `cat <<< WORD | <reader>`
    if _READS.search(head) or _LOGIN_HEAD.search(head) or _READS.search(piped) \
            or _LOGIN_HEAD.search(piped):
        return head + _whole(word)
    if _WRITES.search(head):
        return head + random_words(word)
    return m[0]


def here_doc(m: re.Match[str]) -> str:
    """The replacement of the here-document rule: the body goes line by line for a credential
    reader (also one after a pipe on the first line), its credential words
    (:func:`credential_word`) for a credentials-like file; the delimiter lines stay."""
    first, body = m["first"], m["body"]
    if _READS.search(first) or _LOGIN_HEAD.search(first):
        lines = [_whole(line) for line in body.split("\n")]
        return first + "\n".join(lines) + m["end"]
    if _WRITES.search(first):
        return first + random_words(body) + m["end"]
    return m[0]


def written_to_file(m: re.Match[str]) -> str:
    """The replacement of the echo-to-a-file rule: the credential words
    (:func:`credential_word`) of what ``echo``/``printf`` write to a credentials-like file go."""
    return m["head"] + random_words(m["data"]) + m["tail"]


# --- login subcommands ------------------------------------------------------------------------------

#: ``<cli> [sub [sub]] login`` wherever it stands (a command, or one quoted in an error message
#: or CI output: ``failed: somecli auth login …``); group ``rest`` the rest of that simple
#: command.
_LOGIN_HEAD = re.compile(r"(?<![\w./$-])" + word(r"[a-z][\w.-]*") + r"(?:[ \t]+"
                         + word(r"[a-z][\w-]*") + r"){0,2}[ \t]+" + word("login")
                         + r"(?![\w=:.-])")
_LOGIN = re.compile(_LOGIN_HEAD.pattern + r"(?P<rest>[^|;&\n]*)", re.M)
_SHELL_WORD = re.compile(r"""(?:'[^']*'|"(?:\\.|[^"\\])*"|\\.|[^\s'"\\])+""")
#: A plain word: small letters in parts (``eu-west``, ``my_app.local``) with at most a short
#: number at the end (``eu-west-1``), or a capitalised word.
_PLAIN_WORD = re.compile(r"[a-z]+(?:[-_.][a-z]+)*(?:[-_.]?[0-9]{1,3})?|[A-Z]?[a-z]+|[A-Z]+")


def _login_positional_is_secret(word: str) -> bool:
    w = _unquote(word)
    if len(w) < 8 or w.startswith(REDACTED) or "=" in w.split("/")[0] and not looks_random(w):
        return False
    if not value_is_secret(SECRET, w) or _HOST.fullmatch(w) or _URL.fullmatch(w) \
            or _EMAIL.fullmatch(w) or _PLAIN_WORD.fullmatch(w):
        return False
    if _PATH.fullmatch(w) and not looks_random(w):
        return False
    return True


def login_arguments(m: re.Match[str]) -> str:
    """The replacement of the login rule: in the arguments of ``<cli> [sub] login``, the first
    positional argument goes when it is no host, URL, e-mail address, path, plain word or
    ``$VAR`` (later ones are more often prose: ``user login failed for id <hex>``), and so does
    a flag's value that looks random (:func:`looks_random`), after the flag or after its ``=``
    (``-bo=<random>``: an Intercom key drawn from gitleaks' own regex starts with ``-``), and a
    "flag" of 16 characters or more whose name looks random (a token that starts with ``-``)."""
    rest = m["rest"]
    out, pos, after_flag, positional_seen = [], 0, False, False
    last = 0
    for w in _SHELL_WORD.finditer(rest):
        word = w[0]
        if "'" in rest[last:w.start()] or '"' in rest[last:w.start()]:
            break  # a quote that closes what the login stands in (echo '... login ci' > f)
        last = w.end()
        secret = False
        bare = _unquote(word)
        if bare.startswith("-") and len(bare) > 1:  # a flag, also quoted whole ('--password')
            name, eq, value = word.partition("=")
            after_flag = not eq
            if not eq and len(bare) >= 16 and looks_random(bare.lstrip("-")):
                # no flag's name is random: a token that starts with `-` (a Netlify token
                # drawn from its regex, [\w-]{40,46})
                out.append(rest[pos:w.start()])
                out.append(REDACTED)
                pos = w.end()
                after_flag = False
                continue
            if eq and looks_random(_unquote(value)) and not value.startswith(REDACTED):
                out.append(rest[pos:w.start() + len(name) + 1])  # `-x=<random>`: the value goes
                out.append(REDACTED)
                pos = w.end() - (word[0] in "'\"" and word[-1] == word[0])  # keeps its quote
            continue
        if word.startswith("<") or word.startswith(">"):
            break
        if after_flag:
            secret = looks_random(word) and not word.startswith(REDACTED)
        elif not positional_seen:
            secret = _login_positional_is_secret(word)
            positional_seen = True
        after_flag = False
        if secret:
            out.append(rest[pos:w.start()])
            out.append(REDACTED)
            pos = w.end()
    if not out:
        return m[0]
    out.append(rest[pos:])
    return m[0][: m.start("rest") - m.start()] + "".join(out)


# --- the generic vendor-token shape ------------------------------------------------------------

#: A short lower-case prefix of one to three parts, each followed by ``_`` or ``-``, then a body
#: of 20 or more letters and digits (``acme_live_…``, ``orb_sk_…``, ``qx-…``).
GENERIC_TOKEN = re.compile(r"(?<![A-Za-z0-9])[a-z]{2,10}(?:[_-][a-z]{2,10}){0,2}[_-]"
                           r"(?P<body>[A-Za-z0-9][A-Za-z0-9_-]{18,}[A-Za-z0-9])(?![A-Za-z0-9])")


#: The body of a time-ordered object id: ten or more small hexadecimal digits (a clock) before
#: the random part, as opencode's and Kilo's ``ses_``/``msg_``/``prt_``/``evt_`` ids
#: (``ses_dc8f1435affeCCif37U4P34Qsw``). They name sessions, not secrets; redacted, two commands
#: that differ only by the id became one (and the harness's copy of opencode's database failed
#: on its unique ``event.id``). A random token starts so once in about 770,000 (``(16/62)**10``).
_TIME_ORDERED = re.compile(r"[0-9a-f]{10}")


def generic_tokens(word: str) -> str:
    """``word`` with every generic vendor token in it (:data:`GENERIC_TOKEN`) redacted: the
    longest part of its body between ``_``/``-`` has 16 characters or more, looks random
    (:func:`looks_random`) and is no hexadecimal run (a SHA after ``sha-``), and the body does not
    start as a time-ordered id does (:data:`_TIME_ORDERED`); so names, dates, opencode's session
    ids and UUIDs joined by dashes (``rollout-2026-11-30T17-35-04-<uuid>``,
    ``tmp-harness-claude-8ick90g8-run3-work``) stay."""
    def one(m: re.Match[str]) -> str:
        body = m["body"]
        longest = max(re.split(r"[-_]", body), key=len)
        if _HEX.fullmatch(body.replace("-", "").replace("_", "")) or len(longest) < 16 \
                or _HEX.fullmatch(longest) or not looks_random(longest) \
                or _TIME_ORDERED.match(body):
            return m[0]
        return REDACTED
    return GENERIC_TOKEN.sub(one, word)


# --- the rules -----------------------------------------------------------------------------------

_ECHO = r"""\b(?:echo|printf)\b(?:[ \t]+-[neE]+)*[ \t]+(?:(?P<fq>['"])%s(?:\\n)?(?P=fq)[ \t]+)?"""

#: (pattern, replacement, needs groups...) as in :data:`repeat_failure.rules.scrub_rules.RULES`
#: (a needs group is ``(needles, 0)`` for the text, ``(needles, 1)`` for its case fold).
CONTEXT_RULES: tuple[tuple, ...] = (
    # echo/printf DATA | ... --with-token (or | tee CREDFILE).
    # The pipe may go on (`| tee /dev/stderr | <reader>`), be `|&`, or follow a group
    # (`{ echo DATA; } | <reader>`).
    (re.compile(r"(?P<head>" + _ECHO + r")(?P<data>[^|;&\n]*?)"
                r"(?P<after>(?:[ \t]*;?[ \t]*\})?(?:[ \t]*\|(?!\|)&?[^|;&\n]*)+)"),
     piped_into_reader, (("|",), 0), (("echo", "printf"), 0)),
    # ... --password-stdin <<< WORD, tee CREDFILE <<< WORD, <cli> login <<< WORD.
    (re.compile(r"(?P<head>(?:^|(?<=[|;&\n]))(?:[^|;&\n<]|<(?!<<))*<<<[ \t]*)"
                r"""(?P<word>(?:'[^']*'?|"(?:\\.|[^"\\])*"?|\\.|[^\s'"\\;&|<>()])+)"""
                r"(?=(?P<rest>(?:[^;&\n<]|<(?!<<))*))"),
     here_string, (("<<<",), 0)),
    # <reader> < <(echo DATA): a process substitution feeding a credential reader.
    (re.compile(r"(?P<head>(?:^|(?<=[|;&\n]))[^|;&\n]*?<[ \t]*<\([ \t]*"
                r"(?:echo|printf)\b(?:[ \t]+-[neE]+)*[ \t]+(?:(?P<fq>['\"])%s(?:\\n)?(?P=fq)[ \t]+)?)"
                r"(?P<data>[^)\n]*)(?P<close>\))"),
     lambda m: m["head"] + _whole(m["data"]) + m["close"]
     if _READS.search(m["head"]) or _LOGIN_HEAD.search(m["head"]) else m[0],
     (("<(",), 0)),
    # A here-document whose first line reads a credential or writes a credentials-like file.
    (re.compile(r"(?P<first>(?:^|(?<=\n))[^\n]*?<<-?[ \t]*(['\"]?)(?P<tag>[A-Za-z_][A-Za-z0-9_]*)"
                r"\2[^\n]*\n)(?P<body>[\s\S]*?)(?P<end>\n[ \t]*(?P=tag)[ \t]*(?=\n|\Z)|\Z)"),
     here_doc, (("<<",), 0), (("\n",), 0)),
    # echo/printf DATA > CREDFILE (also >>).
    (re.compile(r"(?P<head>" + _ECHO + r")(?P<data>[^|;&\n>]*?)"
                r"(?P<tail>[ \t]*(?:&>>?|>\||>>?)[ \t]*" + CRED_FILE + ")"),
     written_to_file, (("echo", "printf"), 0), ((">",), 0)),
    # <cli> [sub] login ARGUMENTS.
    (_LOGIN, login_arguments, (("login",), 0)),
    # Connection strings: ;Pwd=... / ;Password=... (ADO.NET, ODBC, JDBC SQL Server).
    (re.compile(r"(?i)(;[ \t]*(?:pwd|password|passwd)[ \t]*=[ \t]*)"
                r"(?!\[REDACTED\])[^;\"'\s]+"),
     lambda m: m[0] if is_reference(m[0][len(m[1]):]) else m[1] + REDACTED,
     (("pwd", "password", "passwd"), 1), ((";",), 0)),
    # Oracle thin: jdbc:oracle:thin:user/password@host.
    (re.compile(r"(?i)(jdbc:oracle:[a-z]+:[^\s/@:'\"]+/)[^\s@'\"]+(?=@)"),
     lambda m: m[1] + REDACTED, (("jdbc:oracle:",), 1)),
)
