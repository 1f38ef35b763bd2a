#!/usr/bin/env bash
# Build the Docker executor's image (default tag cuda-agent-sandbox:latest, or $CUDA_AGENT_DOCKER_IMAGE).
#
#   BASE_IMAGE=nvcr.io/nvidia/pytorch:25.10-py3 bash sandbox/build-image.sh   # a registry is reachable
#   bash sandbox/build-image.sh                    # none is: a Debian base is made here with debootstrap
#   BASE_IMAGE=host bash sandbox/build-image.sh    # none is, and no debootstrap: the host's own system
#
# The local base is the host's own Debian release with g++ and Python 3 (debootstrap, minbase variant),
# imported as cuda-agent-base:<release>; it is made once and reused. On a host that is not Debian (the
# H200 test machine runs Ubuntu), or with BASE_IMAGE=host, the base is a copy of the host's own system
# folders (/usr without /usr/local, /etc without its secrets) imported as cuda-agent-base:host: the same
# compiler and libraries as the host, which the build cache's keys require.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
image=${CUDA_AGENT_DOCKER_IMAGE:-cuda-agent-sandbox:latest}
base=${BASE_IMAGE:-}

host_base() {  # the host's system folders as an image: what a container of host paths needs around them
    echo "making $1 from this machine's own /usr and /etc" >&2
    (cd / && tar --one-file-system -cf - --exclude=./usr/local --exclude=./usr/share/doc \
        --exclude=./usr/share/man --exclude='./etc/shadow*' --exclude='./etc/gshadow*' --exclude=./etc/ssh \
        --exclude=./etc/ssl/private --exclude='./etc/sudoers*' --exclude=./etc/docker \
        ./bin ./sbin ./lib ./lib64 ./usr ./etc 2>/dev/null) | docker import - "$1" >/dev/null
}

if [ "$base" = host ]; then
    base="cuda-agent-base:host"
    docker image inspect "$base" >/dev/null 2>&1 || host_base "$base"
elif [ -z "$base" ]; then
    release=$(. /etc/os-release && [ "${ID:-}" = debian ] && echo "${VERSION_CODENAME:-}" || true)
    if [ -z "$release" ]; then
        base="cuda-agent-base:host"  # not Debian: debootstrap would make another system than the host's
        docker image inspect "$base" >/dev/null 2>&1 || host_base "$base"
    else
        base="cuda-agent-base:$release"
    fi
    if ! docker image inspect "$base" >/dev/null 2>&1; then
        command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install debootstrap, or BASE_IMAGE=host" >&2; exit 1; }
        rootfs=$(mktemp -d)
        trap 'rm -rf "$rootfs"' EXIT
        echo "making $base with debootstrap (about a minute)" >&2
        debootstrap --variant=minbase --include=g++,python3 "$release" "$rootfs" \
            "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
        tar -C "$rootfs" -c . | docker import - "$base" >/dev/null
    fi
fi

docker build --quiet --network none --build-arg BASE_IMAGE="$base" -t "$image" "$here" >/dev/null
echo "$image (from $base)"
