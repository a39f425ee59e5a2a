# optserve service image: Ray Serve with the gRPC API (9000) and the HTTP/JSON API (8000), CPU build.
#
#   docker build -t optserve .
#   docker run --rm --shm-size=2g -p 127.0.0.1:8000:8000 -p 127.0.0.1:9000:9000 -e OPTSERVE_TOKEN=change-me optserve
#
# Inside a container the service must listen on 0.0.0.0 to be reachable through published ports, so it refuses
# to start without a token (OPTSERVE_TOKEN; callers then send `authorization: Bearer <token>`), unless told
# OPTSERVE_SERVE__REQUIRE_TOKEN_BEYOND_LOOPBACK=false. Publish the ports on 127.0.0.1 only to keep it local.
# Other settings: OPTSERVE_<SECTION>__<FIELD> variables, or mount an optserve YAML and set
# OPTSERVE_CONFIG=/path/in/container.yaml (docs/config.md). Ray needs a large /dev/shm (--shm-size).
# The bundled models come with the wheel; mount another model directory and set
# OPTSERVE_ENGINE__MODEL_DIR to serve a different one. On a Ray cluster, use the same image for every node and
# `serve deploy serve/config.yaml` instead (see serve/README.md).
#
# Two stages: the first builds the package's wheel (the gRPC stubs generated into it, the bundled models its
# package data), the second installs it with its [serve] dependencies and runs it as a user without rights.
#
# BASE: any Debian bookworm image with python3 (3.11: the service's Python, docs/config.md), its headers and
# venv; `make image` builds one from Debian's packages with mmdebstrap and builds this file with buildah,
# where no registry or docker daemon is reachable (serve/image/build.sh). PIP_EXTRA_INDEX_URL /
# PIP_FIND_LINKS: where pip finds torch's CPU build; PIP_CERT: a CA bundle for a network whose TLS is
# intercepted.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS wheel
ARG PIP_CERT=
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY . .
RUN python3 -m venv /opt/build && /opt/build/bin/pip wheel --no-deps --wheel-dir /dist .

FROM ${BASE}
ARG PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG PIP_FIND_LINKS=
ARG PIP_CERT=

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    RAY_USAGE_STATS_ENABLED=0 \
    PATH=/opt/venv/bin:$PATH

# libgomp: torch's OpenMP; libnuma: vLLM's CPU worker; g++: vLLM's CPU sampler is compiled by torch.compile
# (inductor) at the first request. A virtual environment: Debian's own python3 refuses pip installs into the
# system (PEP 668).
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1 libnuma1 g++ \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv

# Dependencies first, a layer that survives code changes: the base and [serve] requirements of
# pyproject.toml. torch comes from PyTorch's CPU index; PyPI's torchvision/torchaudio/torchcodec do not match
# it and break transformers, so they are removed.
COPY pyproject.toml /tmp/pyproject.toml
RUN python3 -c "import tomllib; project = tomllib.load(open('/tmp/pyproject.toml', 'rb'))['project']; \
print('\n'.join(project['dependencies'] + project['optional-dependencies']['serve']))" >/tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && pip uninstall -y torchvision torchaudio torchcodec \
    && rm /tmp/pyproject.toml /tmp/requirements.txt

# The package itself, from the wheel (its dependencies are the layer above).
COPY --from=wheel /dist/ /tmp/dist/
RUN pip install --no-deps /tmp/dist/optserve-*.whl \
    && rm -rf /tmp/dist \
    && useradd --create-home --uid 10001 optserve
USER optserve
WORKDIR /home/optserve
ENV OPTSERVE_SERVE__REQUIRE_TOKEN_BEYOND_LOOPBACK=true

EXPOSE 8000 9000
# gRPC over TLS (serve.grpc_tls_port): the TLS front, started when serve.tls_certfile/tls_keyfile are set
EXPOSE 9443
HEALTHCHECK --interval=30s --timeout=5s --start-period=180s \
    CMD python -c "import sys; from optserve.clients.python.client import OptserveClient; \
sys.exit(OptserveClient('localhost:9000', timeout_s=4).health() != 'SERVING')"
CMD ["optserve", "serve", "--host", "0.0.0.0"]
