# optserve service image: Ray Serve with the gRPC API (9000) and the HTTP/JSON API (8000), CPU build.
#
#   docker build -t optserve .
#   docker run --rm --shm-size=2g -p 8000:8000 -p 9000:9000 -e OPTSERVE_TOKEN=change-me optserve
#
# Inside a container the service must listen on 0.0.0.0 to be reachable through published ports, so set
# OPTSERVE_TOKEN (callers then send `authorization: Bearer <token>`); publish the ports on 127.0.0.1 only
# (`-p 127.0.0.1:9000:9000`) to keep it local. Other settings: mount an optserve YAML and set
# OPTSERVE_CONFIG=/path/in/container.yaml (see optserve/config.py). Ray needs a large /dev/shm (--shm-size).
# The bundled models in models/ are copied into the image; mount another model directory and point
# engine.model_dir at it to serve a different one. On a Ray cluster, use the same image for every node and
# `serve deploy serve/config.yaml` instead (see serve/README.md).
#
# BASE: any Debian bookworm image with python3 (3.11), its headers and venv; `make image` builds one from
# Debian's packages with mmdebstrap and builds this file with buildah, where no registry or docker daemon
# is reachable (serve/image/build.sh). PIP_EXTRA_INDEX_URL / PIP_FIND_LINKS: where pip finds torch's CPU
# build; PIP_CERT: a CA bundle for a network whose TLS is intercepted.
ARG BASE=python:3.11-slim-bookworm
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

WORKDIR /opt/optserve

# Dependencies first (a layer that survives code changes). torch comes from PyTorch's CPU index; PyPI's
# torchvision/torchaudio/torchcodec do not match it and break transformers, so they are removed.
COPY pyproject.toml ./
RUN mkdir -p optserve/v1 compiler engine kernels policies looptune_training serve corpus clients passlm \
       passlm/evaluation tuning \
       models/coreset models/looptune models/passformer \
    && touch optserve/__init__.py optserve/v1/__init__.py compiler/__init__.py engine/__init__.py \
       kernels/__init__.py policies/__init__.py looptune_training/__init__.py serve/__init__.py corpus/__init__.py \
       clients/__init__.py passlm/__init__.py passlm/evaluation/__init__.py tuning/__init__.py \
    && pip install -e '.[serve]' \
    && pip uninstall -y torchvision torchaudio torchcodec

COPY . .
# The install generates the gRPC stubs from proto/ (setup.py), never committed.
RUN pip install --no-deps -e . \
    && useradd --create-home optserve && chown -R optserve /opt/optserve
USER optserve

EXPOSE 8000 9000
# gRPC over TLS (serve.grpc_tls_port): the TLS front, started when serve.tls_certfile/tls_keyfile are set
EXPOSE 9443
HEALTHCHECK --interval=30s --timeout=5s --start-period=180s \
    CMD python -c "import sys; from optserve.serve.client import OptserveClient; \
sys.exit(OptserveClient('localhost:9000', timeout_s=4).health() != 'SERVING')"
CMD ["optserve", "serve", "--host", "0.0.0.0"]
