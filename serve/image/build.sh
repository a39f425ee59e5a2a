#!/usr/bin/env bash
# Build the optserve image where no container registry or docker daemon is reachable (as root): a Debian
# bookworm base made from Debian's packages by mmdebstrap, then the repository's Dockerfile on it by buildah.
#
#   serve/image/build.sh [TAG]        # `make image`; TAG defaults to localhost/optserve:latest
#
# Settings (environment): OPTSERVE_TORCH_WHEELS, a folder holding torch's CPU wheel (default /opt/wheels when
# it exists; otherwise pip uses PyTorch's CPU index, as a plain `docker build` does); OPTSERVE_IMAGE_WORK,
# where the base's rootfs.tar is made (default build/image). The base is built once and kept
# (localhost/optserve-base:bookworm-HASH of its package list); `buildah --storage-driver vfs rmi` it to rebuild.
# Reproducible from the same inputs: Debian's bookworm suite, the versions pinned in pyproject.toml, and
# SOURCE_DATE_EPOCH (the last commit's time) for file times in the base.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tag=${1:-localhost/optserve:latest}
work=${OPTSERVE_IMAGE_WORK:-$repo/build/image}
# python3-dev: torch.compile (vLLM's CPU sampler) builds C++ against Python.h at run time (python:3.11 has it)
base_packages=python3,python3-venv,python3-dev,ca-certificates
base=localhost/optserve-base:bookworm-$(echo "$base_packages" | sha256sum | cut -c1-8)  # new list, new base
buildah=(buildah --storage-driver vfs)  # vfs: works inside containers, where overlay mounts do not
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct)}

for tool in buildah mmdebstrap; do
  command -v "$tool" >/dev/null || { echo "error: $tool not found (Debian: apt-get install buildah mmdebstrap)"; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "error: run as root (mmdebstrap and buildah's chroot isolation need it)"; exit 1; }

if ! "${buildah[@]}" inspect --type image "$base" >/dev/null 2>&1; then
  mkdir -p "$work"
  mmdebstrap --variant=minbase --include="$base_packages" bookworm "$work/rootfs.tar"
  printf 'FROM scratch\nADD rootfs.tar /\nCMD ["/bin/bash"]\n' >"$work/Containerfile"
  "${buildah[@]}" bud --isolation chroot -t "$base" -f "$work/Containerfile" "$work"
  rm -f "$work/rootfs.tar"
fi

# pip in the build trusts this host's CA bundle (mounted read-only), as the host's pip does: a network that
# intercepts TLS signs with a CA that Debian's bundle lacks.
pip_args=(--volume /etc/ssl/certs/ca-certificates.crt:/host-ca.crt:ro --build-arg PIP_CERT=/host-ca.crt)
wheels=${OPTSERVE_TORCH_WHEELS:-/opt/wheels}
if [ -d "$wheels" ]; then
  # torch's CPU wheel from this folder (mounted read-only), everything else from PyPI
  pip_args+=(--volume "$wheels:/wheels:ro" --build-arg PIP_FIND_LINKS=/wheels --build-arg PIP_EXTRA_INDEX_URL=)
fi
# docker format: OCI images have no HEALTHCHECK
"${buildah[@]}" bud --isolation chroot --format docker --build-arg BASE="$base" "${pip_args[@]}" \
  -t "$tag" -f "$repo/Dockerfile" "$repo"
echo "built $tag (buildah --storage-driver vfs images)"
