# The image both daemons run from: `gpu-cost-exporter agent` / `gpu-cost-exporter aggregator`.
#   docker build -t gpu-cost-exporter:0.1.0 .          (from the internet: wheels built in the build stage)
#   scripts/build-image --base IMAGE --tag TAG          (hermetic: wheels built on the host, no network here)
# BASE may be any Debian bookworm image with python3 and python3-venv (scripts/base-image makes one).
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
# WHEELS: a directory of the build context holding the package's and its dependencies' wheels (built with
# -c constraints.txt); empty = build them here from constraints.txt, which needs the package index.
ARG WHEELS=""
ARG VENV=/opt/gpu-cost-exporter
COPY . /src
RUN set -eu; \
    python3 -m venv "$VENV"; \
    if [ -n "$WHEELS" ]; then \
      "$VENV/bin/pip" install --no-cache-dir --no-index --find-links "/src/$WHEELS" gpu-cost-exporter; \
    else \
      "$VENV/bin/pip" install --no-cache-dir -c /src/constraints.txt /src; \
    fi; \
    "$VENV/bin/pip" uninstall -q -y pip setuptools; \
    if [ -f /src/build/sbom.cdx.json ]; then cp /src/build/sbom.cdx.json "$VENV/sbom.cdx.json"; fi; \
    chmod -R go-w "$VENV"

ARG BASE=python:3.11-slim
FROM ${BASE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="gpu-cost-exporter" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/gpu-cost-exporter/gpu-cost-exporter"
COPY --from=build /opt/gpu-cost-exporter /opt/gpu-cost-exporter
# UID/GID 65532 own nothing: the environment is root's and read-only to them; they write only in /tmp
# (the chart mounts the ledger and state volumes), so Debian's other world-writable dirs are closed.
RUN set -eu; \
    if command -v useradd >/dev/null; then \
      groupadd --gid 65532 gpucost && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin gpucost; \
    else \
      echo 'gpucost:x:65532:' >> /etc/group && \
      echo 'gpucost:x:65532:65532::/nonexistent:/usr/sbin/nologin' >> /etc/passwd; \
    fi; \
    chmod 1777 /tmp; \
    for d in /var/tmp /run/lock; do if [ -d "$d" ]; then chmod 0755 "$d"; fi; done
ENV PATH=/opt/gpu-cost-exporter/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 9500 9501
ENTRYPOINT ["gpu-cost-exporter"]
CMD ["--help"]
