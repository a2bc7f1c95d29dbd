"""Failing commands built from gitleaks' own true-positive examples (issue 16).

Every example of every rule (:func:`gitleaks_oracle.examples`) is put into :data:`SHAPES`: the
example as gitleaks gives it (a line of code or config) written to a file in four ways, and the
secret gitleaks finds in it standing on its own in ten more: an argument, piped in, in single
and double quotes, after ``=``, in a heredoc, in JSON and YAML text, in a URL, in a file
written with printf. A command is *failing* when gitleaks finds a secret in it before scrub.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gitleaks_oracle import Example, Finding

#: (name, template): ``{line}`` is the example's text, ``{secret}`` the secret gitleaks found in
#: it. The templates are ordinary agent commands; none holds a secret of its own.
SHAPES: tuple[tuple[str, str], ...] = (
    ("echo-append-env", "echo '{line}' >> .env"),
    ("heredoc-line", "cat > settings.py <<'EOF'\n{line}\nEOF"),
    ("printf-line", "printf '%s\\n' '{line}' > credentials"),
    ("tee-herestring", 'tee -a config.ini <<< "{line}"'),
    ("argument", "tool auth login {secret}"),
    ("piped-in", "echo {secret} | tool login --with-token"),
    ("single-quoted", "tool config set value '{secret}'"),
    ("double-quoted", 'tool config set value "{secret}" --global'),
    ("after-equals", "CONFIG_VALUE={secret} ./deploy.sh"),
    ("heredoc-secret", "cat > creds.txt <<EOF\n{secret}\nEOF"),
    ("json-text", "curl -sS -d '{{\"value\": \"{secret}\"}}' https://api.example.com/v1/items"),
    ("yaml-text", "printf 'value: {secret}\\n' >> values.yaml"),
    ("url", 'curl -fsS "https://api.example.com/v1/items?q={secret}&page=2"'),
    ("printf-secret", "printf '%s' {secret} > credentials"),
)


@dataclass
class Case:
    """One command of the corpus: the rule and shape it comes from, and (once scanned) the
    rules gitleaks finds in it before scrub."""

    rule: str
    shape: str
    command: str
    before: set[str] = field(default_factory=set)
    #: Every rule one of whose examples gave this command (``rule`` is the first).
    sources: set[str] = field(default_factory=set)
    #: The secrets gitleaks found in the examples that gave this command (issue 27: the values
    #: no 8-character piece of which may survive scrub).
    secrets: set[str] = field(default_factory=set)


def secrets_of(example: Example, findings: list[Finding]) -> list[str]:
    """The secrets gitleaks finds in an example: those of its own rule, else of any rule."""
    own = [f.secret for f in findings if f.rule == example.rule] or [f.secret for f in findings]
    return sorted(set(own))


def build(examples: list[Example], findings: list[list[Finding]]) -> list[Case]:
    """Every example in every shape (a secret shape once per secret found in it), each distinct
    command once (the first rule and shape it came from), in a stable order."""
    seen: dict[str, Case] = {}
    for example, found in zip(examples, findings):
        secrets = secrets_of(example, found)
        for name, template in SHAPES:
            if "{line}" in template:
                commands = [(template.format(line=example.text), secrets)]
            else:
                commands = [(template.format(secret=s), [s]) for s in secrets]
            for command, planted in commands:
                if command not in seen:
                    seen[command] = Case(example.rule, name, command)
                seen[command].sources.add(example.rule)
                seen[command].secrets.update(planted)
    return list(seen.values())
