"""``scrub()`` is idempotent on command-shaped texts (issue 27's break-it run: a second
``scrub()`` redacted more than the first on 8 of 187,000 random inputs).

The texts are built from the rules' own vocabulary (flags that say secret, login and
secret-setting subcommands, pipes, here-strings, quotes, ``=``, URLs, headers, token-shaped and
shapeless words, ``[REDACTED]`` itself), so the rules match and overlap far more often than on
random text (``tests/test_properties.py`` covers arbitrary text). Two causes were found:

* the credential-header rule's separator gave back a ``\\ `` (an escaped blank) to the value on
  a second pass (``Authorization: \\ X`` became ``Authorization: \\ [REDACTED]``, then
  ``Authorization: [REDACTED]``); its separator is now atomic;
* a rule's match covering another rule's until a later rule redacted part of it (``[REDACTED]=
  api_key= --flag``: the catch-all took ``REDACTED]`` for a name and ``api_key=`` for its value;
  ``e=...TOKEN=<generic token>...TOKEN==key...`` one shell word); :func:`scrub` now runs the
  table again over a text a pass changed, until a pass changes nothing.
"""

from __future__ import annotations

import string

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from repeat_failure.rules.scrub import scrub

_ALNUM = string.ascii_letters + string.digits

#: The rules' vocabulary: flags, subcommands, operators, keys, schemes, the placeholder.
VOCABULARY = (
    "--password", "--token", "--secret", "--api-key", "--access-token", "--secret-string",
    "--value", "--body", "--from-literal", "--from-literal=", "--with-token", "--password-stdin",
    "--type", "SecureString", "--integrity", "-p", "-P", "-u", "-t", "-b", "-S", "login", "auth",
    "init", "docker", "'login'", '"login"', "gh", "secret", "set", "generic", "create",
    "kubectl", "aws", "secretsmanager", "ssm", "put-parameter", "az", "keyvault", "doctl",
    "twine", "upload", "sudo", "chpasswd", "unzip", "mysql", "curl", "-H", "echo", "printf",
    "tee", "cat", "|", ";", "&&", "<<<", ">", ">>", "<<EOF", "EOF", "\n", "=", ":", "'", '"',
    "{", "}", "(", ")", "\\", "\\n", ",", "Authorization:", "Bearer", "Basic", "token:",
    "password:", "PASSWORD=", "TOKEN=", "api_key=", "key", "https://", "user:", "@", "://",
    "?token=", "&key=", "Pwd=", "jdbc:oracle:thin:", "kind:", "Secret", "data:", "sha512-",
    "~/.netrc", ".env", "~/.docker/config.json", "~/.kube/config", "[REDACTED]", "$TOKEN",
)

_token = st.one_of(
    st.text(_ALNUM, min_size=4, max_size=40),
    st.text(_ALNUM + "+/=", min_size=4, max_size=40),
    st.text(_ALNUM + "!%.:@/+=", min_size=4, max_size=40),
    st.text(_ALNUM + "'\"=", min_size=4, max_size=30),
    st.text("0123456789abcdef", min_size=8, max_size=40),
    st.tuples(st.sampled_from(["ghp_", "sk-", "acme_", "xoxb-", "AKIA", "glpat-", "hf_",
                               "mysql-p", "sha256-"]),
              st.text(_ALNUM + "-_", min_size=8, max_size=40)).map("".join),
)
_part = st.one_of(st.sampled_from(VOCABULARY), _token)
_joined = st.tuples(st.lists(st.tuples(_part, st.sampled_from([" ", " ", "  ", "", "=", "\t"])),
                             min_size=1, max_size=14))
commands = _joined.map(lambda t: "".join(p + s for p, s in t[0]))


@settings(max_examples=3000, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(commands)
@example("w53x3ITOcuELhvhFKWlk Authorization: \\ ~/.kube/config gh")
@example("-P  Authorization: \\ ~/.docker/config.json gh jdbc:oracle:thin:")
@example("EOFfA7dz2ey5zbfw+e=Qe5TsWTzAIx2D3Lpa=b=TOKEN=mysql-pkDO0g1uD4qhemiOMPV53I%@7e0B4YEjdW"
         "://mysqlTOKEN==keybbc48ebac223be1bfd4fe19a65cfa8bc")
@example("tzf8YptP3F2iMqSLIF2L <<EOF [REDACTED]= api_key= --from-literal printf keyvault")
def test_scrub_is_idempotent_on_command_shaped_text(text: str) -> None:
    """``scrub(scrub(x)) == scrub(x)`` (also for a cut text's second scrub)."""
    once = scrub(text)
    assert scrub(once) == once
    cut = scrub(text, cut=True)
    assert scrub(cut) == cut
