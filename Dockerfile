# One image for both components: `phalanx webhook` and `phalanx scheduler` (see charts/phalanx).
# Build: docker build -t phalanx:dev .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY phalanx ./phalanx
COPY scheduler ./scheduler
COPY webhook ./webhook
COPY certs ./certs
COPY kube ./kube
# A virtualenv is copied whole into the runtime stage: no compilers or build files there.
RUN python -m venv /opt/phalanx \
 && /opt/phalanx/bin/pip install --upgrade pip \
 && /opt/phalanx/bin/pip install .

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="phalanx" \
      org.opencontainers.image.description="Workload-aware preemption for Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/phalanx/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# 65532 is the conventional "nonroot" uid (distroless); the chart runs as it with a read-only root filesystem.
RUN groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --home-dir /home/nonroot --create-home --shell /usr/sbin/nologin nonroot
COPY --from=build /opt/phalanx /opt/phalanx
USER 65532:65532
WORKDIR /home/nonroot
ENTRYPOINT ["phalanx"]
CMD ["--help"]
