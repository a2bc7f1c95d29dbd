# repeat-failure sidecar (and injector) image.
#
# Two stages on the same pinned base: "build" installs the package and its dependencies into a
# virtualenv at /opt/venv; the final stage copies only that virtualenv (its scripts start with
# #!/opt/venv/bin/python and its python links to /usr/local/bin/python3, the same in both
# stages). No compiler, no pip cache, no pip and no source tree reach the final image.
#
# At run time nothing is written outside the shared directory /var/run/repeat-failure (in
# Kubernetes an emptyDir; readOnlyRootFilesystem: true works). Without Kubernetes, mount it:
#   docker run --read-only --tmpfs /var/run/repeat-failure:uid=10001,gid=10001 IMAGE run ...
# tests/test_dockerfile.py lints this file (hadolint), checks its shape, and runs the build
# stage's install step in a local virtualenv. Building, tagging and pushing it, and the chart
# value that names it (image.reference): docs/image.md.

# The base: the official image, pinned. BASE swaps in another with the same layout (Python 3.11
# at /usr/local/bin/python3), as the real-node tests do with one built from Debian packages
# (tests/kube/images), since no registry is reachable there.
ARG BASE=python:3.11.14-slim-bookworm

FROM ${BASE} AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
RUN python -m venv /opt/venv
# The dependencies exactly as pinned, with their hashes (requirements.lock), first: a layer that
# only changes with the lock.
COPY requirements.lock ./
RUN /opt/venv/bin/pip install --no-cache-dir --require-hashes -r requirements.lock
COPY pyproject.toml README.md LICENSE ./
COPY repeat_failure/ repeat_failure/
COPY hooks/ hooks/
# The package alone, built with the pinned setuptools; then pip and setuptools leave the
# virtualenv: nothing at run time installs anything.
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps --no-build-isolation . \
    && /opt/venv/bin/pip uninstall --yes pip setuptools

FROM ${BASE}

ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="repeat-failure" \
      org.opencontainers.image.description="Sidecar that notices an AI coding agent running the same failing shell command again and again; Prometheus metrics, monitor only." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11.14-slim-bookworm"

COPY --from=build /opt/venv /opt/venv

ENV PATH="/opt/venv/bin:${PATH}" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# Numeric, so Kubernetes' runAsNonRoot can verify it without an /etc/passwd entry.
USER 10001:10001
# 9466: the sidecar's /metrics, /status, /healthz; 9467: the fixloop's /metrics, /healthz,
# /readyz; 9468: the injector's /metrics; 8443: the injector's admission webhook (TLS).
EXPOSE 9466 9467 9468 8443
ENTRYPOINT ["repeat-failure"]
CMD ["run"]
