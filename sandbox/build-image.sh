#!/usr/bin/env bash
# Build the Docker executor's image (default tag cuda-agent-sandbox:latest, or $CUDA_AGENT_DOCKER_IMAGE).
#
#   BASE_IMAGE=nvcr.io/nvidia/pytorch:25.10-py3 bash sandbox/build-image.sh   # a registry is reachable
#   bash sandbox/build-image.sh                    # none is: a Debian base is made here with debootstrap
#
# The local base is the host's own Debian release with g++ and Python 3 (debootstrap, minbase variant),
# imported as cuda-agent-base:<release>; it is made once and reused.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
image=${CUDA_AGENT_DOCKER_IMAGE:-cuda-agent-sandbox:latest}
base=${BASE_IMAGE:-}

if [ -z "$base" ]; then
    release=$(. /etc/os-release && echo "${VERSION_CODENAME:?the host is not Debian: set BASE_IMAGE}")
    base="cuda-agent-base:$release"
    if ! docker image inspect "$base" >/dev/null 2>&1; then
        command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }
        rootfs=$(mktemp -d)
        trap 'rm -rf "$rootfs"' EXIT
        echo "making $base with debootstrap (about a minute)" >&2
        debootstrap --variant=minbase --include=g++,python3 "$release" "$rootfs" \
            "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
        tar -C "$rootfs" -c . | docker import - "$base" >/dev/null
    fi
fi

docker build --quiet --build-arg BASE_IMAGE="$base" -t "$image" "$here" >/dev/null
echo "$image (from $base)"
