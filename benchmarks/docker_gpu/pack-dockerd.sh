#!/usr/bin/env bash
# Pack a Docker engine from Debian's packages for a machine that has none and no registry (the H200 test
# machine): dockerd, containerd, its runc shim, runc, tini (docker-init) and the docker CLI, stripped and xz-compressed, the
# libraries Ubuntu lacks, and the Docker SDK wheel. About 48 MB, under the device tool's 64 MiB.
#
#   bash benchmarks/docker_gpu/pack-dockerd.sh .dk      # then: source benchmarks/docker_gpu/start-dockerd.sh .dk
set -euo pipefail
pack=$(mkdir -p "${1:?usage: pack-dockerd.sh PACK_DIR}" && cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get download docker.io containerd runc tini libdevmapper1.02.1 >/dev/null
for deb in *.deb; do dpkg -x "$deb" root; done
mkdir -p "$pack/lib"
for bin in usr/sbin/dockerd usr/bin/docker usr/bin/containerd usr/bin/containerd-shim-runc-v2 usr/sbin/runc; do
    strip -o "$work/$(basename "$bin")" "root/$bin"
    xz -T0 -9e -c "$work/$(basename "$bin")" > "$pack/$(basename "$bin").xz"
done
xz -T0 -9e -c root/usr/bin/tini-static > "$pack/docker-init.xz"  # the init of `docker run --init`
cp -L root/lib/x86_64-linux-gnu/libdevmapper.so.1.02.1 "$pack/lib/"
python3 -m pip download -q --no-deps --only-binary=:all: -d "$pack" docker==7.2.0
du -sh "$pack"
