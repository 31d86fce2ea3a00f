# The image both daemons run from: `gpu-cost-exporter agent` / `gpu-cost-exporter aggregator`.
# Build: docker build -t gpu-cost-exporter:0.1.0 .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY exporter ./exporter
# Wheels of the package and its exact tested dependency versions (constraints.txt), built here so the
# final stage needs no compiler, no pip cache and no network.
RUN pip wheel --no-cache-dir --wheel-dir /wheels -c constraints.txt .

FROM python:3.11-slim
RUN useradd --uid 65532 --user-group --no-create-home --shell /usr/sbin/nologin gpucost
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index /wheels/*.whl && rm -rf /wheels /root/.cache
USER 65532:65532
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
EXPOSE 9500 9501
ENTRYPOINT ["gpu-cost-exporter"]
CMD ["--help"]
