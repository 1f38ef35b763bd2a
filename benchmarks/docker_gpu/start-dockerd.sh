#!/usr/bin/env bash
# Start a Docker engine from Debian's packages on a machine that has none (the H200 test machine), with
# nothing installed under /: the binaries unpacked in $DK_ROOT, no iptables, no bridge, overlay2 storage.
#
#   source benchmarks/docker_gpu/start-dockerd.sh .dk      # .dk made by pack-dockerd.sh
#
# Exports DOCKER_HOST. Libraries the machine lacks (libdevmapper on Ubuntu) come from the pack.
pack=${1:?usage: start-dockerd.sh PACK_DIR}
DK_ROOT=${DK_ROOT:-/tmp/dk}
mkdir -p "$DK_ROOT/bin" "$DK_ROOT/lib" "$DK_ROOT/data"
pids=
for f in "$pack"/*.xz; do xz -T4 -dc "$f" > "$DK_ROOT/bin/$(basename "$f" .xz)" & pids="$pids $!"; done
wait $pids  # by pid: a bare `wait` also waits for any process substitution of the caller
chmod +x "$DK_ROOT"/bin/*
for lib in "$pack"/lib/*; do
    ldconfig -p | grep -q "$(basename "$lib") " || cp "$lib" "$DK_ROOT/lib/"
done
export PATH=$DK_ROOT/bin:$PATH DOCKER_HOST=unix://$DK_ROOT/docker.sock
LD_LIBRARY_PATH=$DK_ROOT/lib setsid dockerd --data-root "$DK_ROOT/data" --exec-root "$DK_ROOT/exec" \
    -p "$DK_ROOT/docker.pid" -H "$DOCKER_HOST" --storage-driver overlay2 \
    --iptables=false --ip6tables=false --ip-masq=false --ip-forward=false --bridge=none --userland-proxy=false \
    > "$DK_ROOT/dockerd.log" 2>&1 < /dev/null &
for _ in $(seq 60); do docker info > /dev/null 2>&1 && break; sleep 0.5; done
docker info > /dev/null 2>&1 || { tail -20 "$DK_ROOT/dockerd.log"; echo "dockerd did not start" >&2; return 1 2>/dev/null || exit 1; }
