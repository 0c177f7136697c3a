# syntax=docker/dockerfile:1
# The image the CronJob runs: `mxgitops sync`, configured by MXGITOPS_* variables.
#   docker build -t registry.example.com/mxgitops:0.1.0 .
# Reproducible inputs only: the base by digest, Python packages from the hash-pinned
# image/*.lock files (pip --require-hashes), mxgitops from this directory.
#
# The base: python:3.11-slim-bookworm (Debian 12). To take its updates (security
# fixes), look up the current digest and replace both FROM lines' digest:
#   docker buildx imagetools inspect python:3.11-slim-bookworm --format '{{json .Manifest.Digest}}'
#   (or: crane digest python:3.11-slim-bookworm)
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

# -- build: a virtual environment with mxgitops and its locked dependencies ---------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_NO_INPUT=1
WORKDIR /src
COPY image/build.lock image/requirements.lock image/
RUN python -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes --no-deps -r image/build.lock \
 && python -m venv --without-pip /opt/mxgitops \
 && /opt/build/bin/pip --python /opt/mxgitops/bin/python install \
      --require-hashes --no-deps --only-binary=:all: -r image/requirements.lock
COPY pyproject.toml README.md ./
COPY mxgitops ./mxgitops
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && /opt/build/bin/pip --python /opt/mxgitops/bin/python install --no-deps --no-index /wheels/*.whl \
 && /opt/mxgitops/bin/mxgitops --version

# -- final: Python, git and ssh; no pip, no compiler, no build files ------------------
FROM ${PYTHON_IMAGE}
# git and ssh come from the Debian release the base digest pins; take their security
# updates by rebuilding on a newer base digest, hence no version pins here.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends git openssh-client ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && python -m pip uninstall --yes pip setuptools wheel \
 && groupadd --gid 10001 mxgitops \
 && useradd --uid 10001 --gid 10001 --home-dir /home/mxgitops --create-home \
      --shell /usr/sbin/nologin mxgitops \
 && install -d -o 10001 -g 10001 /cache
COPY --from=build /opt/mxgitops /opt/mxgitops
# Byte code was compiled at install: nothing is written under / at run time, so the
# root filesystem can be read-only (the CronJob mounts HOME, /tmp and /cache).
ENV PATH=/opt/mxgitops/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/home/mxgitops \
    MXGITOPS_CACHE_DIR=/cache \
    MXGITOPS_LOG_FORMAT=json
USER 10001:10001
WORKDIR /home/mxgitops
ENTRYPOINT ["mxgitops"]
CMD ["sync"]
