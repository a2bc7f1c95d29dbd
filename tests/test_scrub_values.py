"""Secrets judged by value (issue 27, C-AC13): planted values the test knows, in the contexts
where the command's own grammar says they are secret, and no 8-character piece of any of them
on any channel: ``scrub()``, ``/metrics``, ``/status``, the JSON log, the state files, the
Kubernetes Event bodies, ``repeat-failure replay`` and ``verdict`` output and the fix loop's
comments. The values and shapes are :mod:`secret_values` (built in code, never a real token);
gitleaks' own examples are judged by value in ``tests/test_scrub_gitleaks.py``.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

import secret_values as sv
from repeat_failure.rules.scrub import REDACTED, scrub
from repeat_failure.rules.scrub_context import credential_word, looks_random
from sidecar_channels import T0, sidecar_channels

#: Kinds whose value has no shape of its own (a random word of a vendor's alphabet: a 40
#: character base64 AWS secret key, 64 small letters and digits, 48 hex digits, 88 base64
#: characters): only a context tells them from a checksum or an id, and the shapes of
#: :data:`secret_values.SHAPE_ONLY` give none. Counted, not asserted, there.
SHAPELESS_KINDS = {("detect-secrets", "aws-secret-key"), ("detect-secrets", "azure-storage"),
                   ("detect-secrets", "cloudant"), ("detect-secrets", "ibm-cos-hmac"),
                   ("detect-secrets", "softlayer")}


def _expected_gone(p: sv.Planted) -> bool:
    return not (p.shape in sv.SHAPE_ONLY and (p.source, p.kind) in SHAPELESS_KINDS)


def _gone() -> list[sv.Planted]:
    """The planted commands whose value must be gone (the channel tests send only these)."""
    return [p for p in sv.corpus() if _expected_gone(p)]


def test_the_corpus_covers_every_source_and_shape() -> None:
    """Four sources of values, 57 shapes, 46 values; every value is a stranger to every template
    (no piece of it is in the command around it)."""
    corpus = sv.corpus()
    assert {s for s, _ in sv.VALUES} == {"vendor-formats", "detect-secrets", "no-vendor",
                                         "structure-only"}
    assert (len(sv.VALUES), len(sv.SHAPES), len(corpus)) == (46, 57, 2612)
    for p in corpus:
        assert sv.survivors(p.value, p.command, context=sv.context_of(p.command, [p.value])) \
            != [] and sv.survivors(p.value, sv.context_of(p.command, [p.value])) == []


def test_no_planted_value_survives_scrub() -> None:
    """No 8-character piece of any planted value is left by ``scrub()`` in any shape but the
    shapeless kinds in the shapes that say nothing (10 commands: printed). Prints the figures
    per source and shape."""
    per_source, per_shape, total = (collections.Counter(), collections.Counter(),
                                    collections.Counter())
    left, shapeless = [], []
    for p in sv.corpus():
        out = scrub(p.command)
        total[p.source] += 1
        if sv.survivors(p.value, out):
            per_source[p.source] += 1
            per_shape[p.shape] += 1
            (left if _expected_gone(p) else shapeless).append((p.kind, p.shape, out))
    print("\nplanted values surviving scrub: " + ", ".join(
        f"{s} {per_source[s]}/{total[s]}" for s in total) + "; by shape: "
        + (", ".join(f"{k} {v}" for k, v in sorted(per_shape.items())) or "none"))
    assert left == []
    assert len(shapeless) == 10


@pytest.mark.parametrize("command,expected", [
    ("echo Zq3xV9pLm2Kw8RtY4bNc | gh auth login --with-token",
     f"echo {REDACTED} | gh auth login --with-token"),
    ("printf '%s\\n' 'Zq3x/V9p+Lm2=Kw8' | docker login -u ci --password-stdin ghcr.io",
     f"printf '%s\\n' {REDACTED} | docker login -u ci --password-stdin ghcr.io"),
    ("podman login -u ci --password-stdin quay.io <<< 'Zq3x/V9p+Lm2=Kw8'",
     f"podman login -u ci --password-stdin quay.io <<< {REDACTED}"),
    ("gh auth login --with-token <<'EOF'\nZq3xV9pLm2Kw8RtY\nEOF",
     f"gh auth login --with-token <<'EOF'\n{REDACTED}\nEOF"),
    ("cat <<EOF | docker login --username ci --password-stdin\nZq3xV9pLm2Kw8RtY\nEOF",
     f"cat <<EOF | docker login --username ci --password-stdin\n{REDACTED}\nEOF"),
    ("somecli auth login Zq3xV9pLm2Kw8RtY", f"somecli auth login {REDACTED}"),
    ("vendorctl login --region eu Zq3x/V9p+Lm2=Kw8", f"vendorctl login --region eu {REDACTED}"),
    ("printf '%s\\n' Zq3xV9pLm2Kw8RtY > ~/.config/vendorctl/credentials",
     f"printf '%s\\n' {REDACTED} > ~/.config/vendorctl/credentials"),
    ("echo 'machine api.example.com login ci password Zq3x/V9p+Lm2=Kw8' >> ~/.netrc",
     f"echo 'machine api.example.com login ci password {REDACTED}' >> ~/.netrc"),
    ("echo 4305d4ce-344c-427c-aeb9-22ab9e42bf71 >> deploy.env", f"echo {REDACTED} >> deploy.env"),
    # Pipelines that go on, `|&`, a group, a here-string piped on, a process substitution,
    # `>|` and `&>` (a break-it run: these kept the value).
    ("cat <<< Zq3xV9pLm2Kw8RtY | docker login -u me --password-stdin",
     f"cat <<< {REDACTED} | docker login -u me --password-stdin"),
    ("echo Zq3xV9pLm2Kw8RtY | tee /dev/stderr | docker login -u me --password-stdin",
     f"echo {REDACTED} | tee /dev/stderr | docker login -u me --password-stdin"),
    ("{ echo Zq3xV9pLm2Kw8RtY; } | gh auth login --with-token",
     f"{{ echo {REDACTED}; }} | gh auth login --with-token"),
    ("echo Zq3xV9pLm2Kw8RtY |& docker login -u me --password-stdin",
     f"echo {REDACTED} |& docker login -u me --password-stdin"),
    ("docker login -u me --password-stdin < <(echo Zq3xV9pLm2Kw8RtY)",
     f"docker login -u me --password-stdin < <(echo {REDACTED})"),
    ("printf '%s' 'Zq3xV9pLm2Kw8RtY' >| ~/.netrc", f"printf '%s' '{REDACTED}' >| ~/.netrc"),
    ("echo 'machine h password Zq3x/V9p+Lm2=Kw8' &> ~/.netrc",
     f"echo 'machine h password {REDACTED}' &> ~/.netrc"),
    # The file's name quoted, or $HOME quoted in it (a break-it run: these kept the value).
    ('echo Zq3xV9pLm2Kw8RtY > ".env"', f'echo {REDACTED} > ".env"'),
    ("echo Zq3xV9pLm2Kw8RtY > './prod.env'", f"echo {REDACTED} > './prod.env'"),
    ('echo Zq3xV9pLm2Kw8RtY >> "$HOME/.aws/credentials"',
     f'echo {REDACTED} >> "$HOME/.aws/credentials"'),
    ("echo 'machine h password Zq3x/V9p+Lm2=Kw8' >> \"${HOME}/.netrc\"",
     f"echo 'machine h password {REDACTED}' >> \"${{HOME}}/.netrc\""),
    ("echo 'machine h password Zq3x/V9p+Lm2=Kw8' | tee -a \"$HOME\"/.netrc",
     f"echo 'machine h password {REDACTED}' | tee -a \"$HOME\"/.netrc"),
    ("cat > creds.txt <<EOF\ndeveloper:yqDVtkqPECriaLRi\nEOF",
     f"cat > creds.txt <<EOF\n{REDACTED}\nEOF"),
    ("printf '%s\\n' 'key = \"Zq3xV9pLm2Kw8RtY4bNc\"' >> config.toml",
     f"printf '%s\\n' 'key = {REDACTED}' >> config.toml"),
    ("git clone https://deploy:/J.amLrh7.s2NUEnV+=@git.example.com/org/repo.git",
     f"git clone https://{REDACTED}@git.example.com/org/repo.git"),
    ("sqlplus -L 'jdbc:oracle:thin:app/Zq3x/V9p+Lm2=Kw8@db.example.com:1521/ORCL'",
     f"sqlplus -L 'jdbc:oracle:thin:app/{REDACTED}@db.example.com:1521/ORCL'"),
    ('dotnet run -- "Server=db;Database=app;User Id=sa;Pwd=Zq3x/V9p+Lm2=Kw8;"',
     f'dotnet run -- "Server=db;Database=app;User Id=sa;Pwd={REDACTED};"'),
    ("somecli config set value acme_live_Zq3xV9pLm2Kw8RtY4bNc7Hd",
     f"somecli config set value {REDACTED}"),
    ("curl -H 'Authorization: Api-Token 22cb987851bc5659l29114c62e60c79abd0d2c08' https://x",
     f"curl -H 'Authorization: {REDACTED}' https://x"),
    ("tee -a config.ini <<< \"launchdarkly_token: l_0j8m0wvmf2yu0uyvfw9jg=1q2bhkolv\"",
     f"tee -a config.ini <<< \"launchdarkly_token: {REDACTED}\""),
])
def test_the_grammar_marks_the_secret(command: str, expected: str) -> None:
    """Each context issue 27 names: the credential goes, the command around it stays."""
    assert scrub(command) == expected
    assert scrub(expected) == expected


def test_a_quoted_assignment_with_no_value_keeps_the_text_before_it() -> None:
    """A quoted ``NAME=`` closed right after its ``=`` has no value; the text before it was
    dropped (``tee -a config.ini <<< "`` vanished: issue 27 found it through the gitleaks
    corpus)."""
    command = 'tee -a config.ini <<< "krakenToken="pt=2qbr2zu0emeq+70ygx+-wp5bxit""'
    assert scrub(command) == f'tee -a config.ini <<< "krakenToken={REDACTED}"'


@pytest.mark.parametrize("command", [
    "echo $GHCR_TOKEN | docker login ghcr.io -u ci --password-stdin",
    "gh auth login --with-token <<< \"$GH_TOKEN\"", "cat ~/.tokens/gh | gh auth login --with-token",
    "docker login ghcr.io", "gcloud auth login dev@example.com", "az login --tenant "
    "72f988bf-86f1-41af-91ab-2d7cd011db47", "argocd login argocd.example.com --sso",
    "git commit -m 'fix login redirect for SSO users'", "echo 'NODE_ENV=production' >> .env",
    "printf '[distutils]\\nindex-servers = pypi\\n' > ~/.pypirc",
    "cat > .env <<EOF\nDEBUG=1\nDATABASE_HOST=localhost\nREGION=eu-west-1\nEOF",
    "cat <<'EOF' > docker-compose.override.yml\nservices:\n  api:\n    ports: [\"8080:8080\"]\nEOF",
    "python - <<'EOF'\nimport uuid\nprint(uuid.uuid4())\nEOF",
    "git show 3f2c9a1b7e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b", "docker build -t app:sha-"
    "3f2c9a1b7e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b .", "kubectl get pod "
    "0b2c3d4e-5f60-4a1b-8c2d-3e4f5a6b7c8d -n jobs",
    "echo '63d9a376dc898cb69eaa9cedb695ec51c8a0c05653922527cf191afb493483eb  app.tgz' | sha256sum -c -",
    "git clone https://git.example.com:8443/org/repo.git",
    "printf 'key = \"logging.level\"\\n' >> settings.toml",
    "echo 'user login failed for id 4f3a2b1c9d8e7f6a5b4c3d2e' >> app.log",
    "echo hello | tee /dev/stderr | wc -l", "cat <<< hello | wc -c", "diff <(echo a) <(echo b)",
    "echo hi >| out.txt", "{ echo build; echo test; } | xargs -n1 make",
])
def test_ordinary_commands_in_those_contexts_stay(command: str) -> None:
    """The same grammar with nothing secret in it (a ``$VAR``, a host, an e-mail address, a
    UUID flag value, plain words, SHAs, digests, a port): unchanged."""
    assert scrub(command) == command


@pytest.mark.parametrize("word,random", [
    ("Zq3xV9pLm2Kw8RtY", True), ("yqDVtkqPECriaLRi", True), ("b02cb8d490bf98dd4e7da890df96837093a2416b", True),
    ("GH2=fO%+%GT4qESPS/e", True), ("getUserTokenFromCache", False), ("production", False),
    ("v1.2.3-rc4", False), ("python3.11-slim", False), ("reports/2024/q1.csv", False),
    ("0b2c3d4e-5f60-4a1b-8c2d-3e4f5a6b7c8d", False), ("api.example.com", False),
    ("dev@example.com", False), ("$GH_TOKEN", False), ("short1A", False),
])
def test_looks_random(word: str, random: bool) -> None:
    """Random-looking: letters and digits mixed in short runs; not a name, version, path,
    UUID, host, address or variable."""
    assert looks_random(word) is random


@pytest.mark.parametrize("word,secret", [
    ("4305d4ce-344c-427c-aeb9-22ab9e42bf71", True), ("developer:yqDVtkqPECriaLRi", True),
    ("602840917860208765", True), ("cafebabedeadbeef", True), ("dropboxToken", False),
    ("[distutils]", False), ("eu-west-1", False), ("production", False), ("8080:8080", False),
    ("https://registry.npmjs.org/", False), ("12345678901", False),
])
def test_credential_word(word: str, secret: bool) -> None:
    """In a credentials-like file: a UUID, a user:password, a long number, a hex run go; names,
    plain words, ports, URLs and short numbers stay."""
    assert credential_word(word) is secret


# --- every channel ------------------------------------------------------------------------------

def _leaks(outputs: dict[str, str], planted: list[sv.Planted]) -> list[tuple[str, str, str]]:
    """(channel, shape, piece) for every piece of a planted value found in an output; a piece
    some command also holds outside its value is no evidence."""
    context = "\n".join(sv.context_of(p.command, [p.value]) for p in planted)
    owner: dict[str, sv.Planted] = {}
    for p in planted:
        for piece in sv.pieces(p.value):
            if piece not in context:
                owner.setdefault(piece, p)
    found = []
    for name, text in outputs.items():
        for i in range(len(text) - sv.PIECE + 1):
            p = owner.get(text[i:i + sv.PIECE])
            if p is not None:
                found.append((name, p.shape, text[i:i + sv.PIECE]))
    return found


def test_no_planted_value_on_any_sidecar_channel(tmp_path, log_stream, monkeypatch) -> None:
    """Every planted command fails twice (threshold 2) in the hook's records, through a real
    sidecar with Kubernetes Events on (a fake Events API on 127.0.0.1; the run is
    :func:`sidecar_channels.sidecar_channels`): no piece of a planted value in /metrics,
    /status, the log, the state files or the Event bodies."""
    planted = _gone()
    outputs = sidecar_channels([p.command for p in planted], 2, tmp_path, log_stream,
                               monkeypatch)
    assert _leaks(outputs, planted) == []


def test_no_planted_value_in_replay_output(tmp_path, capsys) -> None:
    """``repeat-failure replay`` over a mini-swe-agent trajectory in which every planted
    command fails twice: no piece of a value in what it prints."""
    from repeat_failure.cli import main

    planted = _gone()
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"}]
    ts = 1796100000
    for p in planted:
        for _ in range(2):
            ts += 1
            msgs += [{"role": "assistant", "content": f"```bash\n{p.command}\n```",
                      "extra": {"response": {"created": ts}}},
                     {"role": "user", "content": "<returncode>1</returncode>\n<output>\n</output>"}]
    path = tmp_path / "planted.traj.json"
    path.write_text(json.dumps({"messages": msgs, "trajectory_format": "mini-swe-agent-1"}))
    code = main(["replay", "--threshold", "2", str(path)])
    out = capsys.readouterr()
    # Commands that differ only in their (redacted) secret are one note: about one per shape.
    assert code == 0 and out.out.count("note: ") >= len(sv.SHAPES)
    assert _leaks({"stdout": out.out, "stderr": out.err}, planted) == []


def test_no_planted_value_in_verdict_output(tmp_path, capsys) -> None:
    """``repeat-failure verdict --json`` on Claude Code's real error transcript with each planted
    command as the error text: neither stdout nor stderr holds a piece of the value."""
    from harness.evidence import primary
    from repeat_failure.cli import main

    source = primary() / "claude" / "verdict" / "error" / "transcript.jsonl"
    raw = source.read_text()
    marker = "harness: stub refused the request"
    assert marker in raw
    planted = _gone()
    outputs = {}
    for i, p in enumerate(planted):
        path = tmp_path / f"t{i}.jsonl"
        path.write_text(raw.replace(marker, json.dumps(f"failed: {p.command}")[1:-1]))
        assert main(["verdict", "--json", str(path)]) == 4
        out = capsys.readouterr()
        outputs[f"{i}"] = out.out + out.err
    assert sum(REDACTED in text for text in outputs.values()) > len(planted) * 0.9
    assert _leaks(outputs, planted) == []


def test_no_planted_value_in_the_fix_loop_comments() -> None:
    """The fix loop's failure evidence (check summaries quoted in its comments) with each
    planted command as a failing check's output: no piece of a value in the excerpt."""
    from repeat_failure.fixloop.comments import excerpt
    from repeat_failure.fixloop.github_models import Check

    planted = _gone()
    outputs = {}
    for i, p in enumerate(planted):
        check = Check(f"test-{i}", "red", "failure", T0, f"Error: step failed\n$ {p.command}\n",
                      "", "check_run", "github-actions", 1)
        outputs[str(i)] = excerpt([check])
    assert _leaks(outputs, planted) == []


def test_ordinary_corpus_path(tmp_path) -> None:
    """The ordinary-commands corpus holds the issue's SHAs, UUIDs, digests and checksums."""
    text = (Path(__file__).parent / "data" / "ordinary_commands.txt").read_text()
    for needle in ("git show ", "sha256sum -c", "kubectl get pod ", "@sha256:", "--tenant ",
                   "gh auth login --hostname", "echo 'NODE_ENV=production' >> .env"):
        assert needle in text, needle


@pytest.mark.slow
def test_gitleaks_is_the_second_opinion(tmp_path) -> None:
    """gitleaks (the pinned release, as in ``tests/test_scrub_gitleaks.py``) flags 1,378 of the
    2,612 planted commands before ``scrub()`` and none after: it agrees, but it is not the
    judge (it stays silent on the 1,234 it never flagged). Skipped without go or the binary."""
    import gitleaks_oracle as oracle

    go = oracle.find_go()
    binary = oracle.gitleaks(go) if go else None
    if binary is None:
        pytest.skip(f"gitleaks {oracle.VERSION} is not installed; scripts/test installs it")
    planted = sv.corpus()
    before = oracle.scan(binary, [p.command for p in planted], tmp_path)
    after = oracle.scan(binary, [scrub(p.command) for p in planted], tmp_path)
    assert sum(1 for found in before if found) == 1378
    assert [(p.shape, p.kind, f) for p, f in zip(planted, after) if f] == []
