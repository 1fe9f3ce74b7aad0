# vllm-triage's HTTP backend (`vllm-triage serve`).
#
#   docker build -t vllm-triage:0.1.0 .        # tag it with the tool's version, not :latest
#   docker run --rm -p 8080:8080 -e VLLM_TRIAGE_TOKEN="$(openssl rand -hex 32)" \
#       [-e SLACK_SIGNING_SECRET=...] vllm-triage:0.1.0
#
# It listens on 0.0.0.0, so it refuses to start without VLLM_TRIAGE_TOKEN (the bearer token
# callers must send); add `--insecure-no-auth` to the command only behind your own auth.
# Limits: VLLM_TRIAGE_MAX_BYTES, VLLM_TRIAGE_MAX_CONCURRENCY (worker processes, about one
# per core, ~50 MiB each), VLLM_TRIAGE_TIMEOUT, VLLM_TRIAGE_HEADER_TIMEOUT,
# VLLM_TRIAGE_MAX_CONNECTIONS. Kubernetes manifests: deploy/.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY pyproject.toml README.md /tmp/src/
COPY triage /tmp/src/triage
COPY rules /tmp/src/rules
RUN pip install "/tmp/src[server,fast]" \
    && rm -rf /tmp/src \
    && groupadd --gid 10001 triage \
    && useradd --create-home --uid 10001 --gid 10001 --shell /usr/sbin/nologin triage

# numeric, so Kubernetes' runAsNonRoot can check it (a user name cannot be verified as non-root)
USER 10001:10001
WORKDIR /home/triage
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
CMD ["vllm-triage", "serve", "--host", "0.0.0.0", "--port", "8080"]
