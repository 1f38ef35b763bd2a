#!/usr/bin/env bash
# Issue 30 on the H200: the Docker executor with GPU workers, no NVIDIA container toolkit (there is none).
#
#   bash benchmarks/docker_gpu/h200_docker.sh     (repo root, as root; .dk made by pack-dockerd.sh, with
#                                                  the wheels in .dk/whl and KernelBench in .dk/kernelbench)
#
# Starts dockerd from the pack, makes the image from the machine's own system (BASE_IMAGE=host), makes a
# user of the docker group (GPU worker containers run as the judge's user, never root), and as that user:
# the Docker GPU tests, the bundled examples through the CLI on both executors (the sandbox as root, as the
# H200 is normally used), the start of a GPU container, and the honest corpus and forgeries on Docker.
# Logs and JSON to $OUT.
set -u
OUT=${OUT:-/tmp/docker-gpu}; mkdir -p "$OUT" && chmod 1777 "$OUT"  # the user writes there too
exec > >(tee "$OUT/run.log") 2>&1
T0=$SECONDS; t() { echo "== [$((SECONDS - T0))s] $*"; }
repo=$PWD
t "dockerd"
source benchmarks/docker_gpu/start-dockerd.sh .dk || exit 3
docker version --format 'engine {{.Server.Version}}'
groupadd -f docker && chgrp docker "${DOCKER_HOST#unix://}" && chmod 660 "${DOCKER_HOST#unix://}"
id kb >/dev/null 2>&1 || useradd -m -u 2000 -G docker kb
t "image from the machine's own system"
BASE_IMAGE=host bash sandbox/build-image.sh || exit 3
docker images --format '{{.Repository}}:{{.Tag}} {{.Size}}'
t "copy for the user"
rm -rf /home/kb/repo && cp -a "$repo" /home/kb/repo && rm -rf /home/kb/repo/.dk/*.xz && chown -R kb:kb /home/kb/repo
as_kb() {  # the rest runs as kb, a member of the docker group
  setpriv --reuid 2000 --regid 2000 --init-groups env -i PATH="$PATH" HOME=/home/kb USER=kb LOGNAME=kb \
    DOCKER_HOST="$DOCKER_HOST" PYTHONUNBUFFERED=1 BENCH_COMMIT="${BENCH_COMMIT:-unknown}" "$@"
}
as_kb bash -c 'cd ~/repo && python3 -m pip install -q --no-index --no-deps --no-compile --target ~/site .dk/whl/*.whl' || exit 3
KBENV="cd ~/repo && export PYTHONPATH=\$HOME/site:\$HOME/repo CUDA_AGENT_CACHE=\$HOME/cache"
KOUT=/tmp/kb-out; mkdir -p $KOUT && chmod 1777 $KOUT  # the user's files (it cannot enter root's $OUT)

t "start to first kernel in a GPU worker container (toolkit-free), 3 times"
as_kb bash -c "$KBENV && python3 benchmarks/docker_gpu/container_start.py --repeats 3 --out $KOUT/container_start.json" 2>&1 | tail -5
cp $KOUT/* "$OUT/" 2>/dev/null  # after each step: a run cut off by its time limit keeps what it measured

t "Docker GPU tests"
as_kb bash -c "$KBENV && timeout 240 python3 -m pytest -q -p no:cacheprovider -rfEs tests/gpu/test_docker_gpu.py" > "$OUT/pytest_docker_gpu.log" 2>&1
echo "pytest exit $?"; tail -15 "$OUT/pytest_docker_gpu.log"

t "examples: sandbox (root, unless SKIP_SANDBOX=1) then docker (kb), cold then warm"
mkdir -p /tmp/ex-root && for n in relu bias_add_relu row_sum; do cp -r examples/$n /tmp/ex-root/; done
as_kb bash -c "mkdir -p ~/ex && cp -r ~/repo/examples/{relu,bias_add_relu,row_sum} ~/ex/"
for round in cold warm; do
  for n in relu bias_add_relu row_sum; do
    s=$SECONDS
    [ "${SKIP_SANDBOX:-0}" = 1 ] || (export PYTHONPATH=$HOME/site-root:$repo CUDA_AGENT_CACHE=/tmp/cache-root USER=root LOGNAME=root
     [ -d $HOME/site-root ] || python3 -m pip install -q --no-index --no-deps --no-compile --target $HOME/site-root .dk/whl/*.whl
     cd / && timeout 240 python3 -m cuda_agent_mcp eval /tmp/ex-root/$n --json > "$OUT/sandbox_${round}_$n.json" 2> "$OUT/sandbox_${round}_$n.err")
    [ "${SKIP_SANDBOX:-0}" = 1 ] || echo "sandbox $round $n rc=$? $((SECONDS - s))s" | tee -a "$OUT/examples.txt"
    s=$SECONDS
    as_kb bash -c "$KBENV && export CUDA_AGENT_EXECUTOR=docker && cd / && timeout 240 python3 -m cuda_agent_mcp eval ~/ex/$n --json" > "$OUT/docker_${round}_$n.json" 2> "$OUT/docker_${round}_$n.err"
    echo "docker $round $n rc=$? $((SECONDS - s))s" | tee -a "$OUT/examples.txt"
  done
done
python3 benchmarks/docker_gpu/compare_examples.py "$OUT" | tee "$OUT/examples_summary.txt"

t "honest corpus and forgeries on Docker (kb), what time allows"
as_kb bash -c "$KBENV && export CUDA_AGENT_EXECUTOR=docker && timeout ${CORPUS_LIMIT:-200} python3 benchmarks/acceptance.py --kernelbench .dk/kernelbench --out $KOUT/acceptance_docker.json" > "$OUT/corpus_docker.log" 2>&1
echo "corpus exit $?"; cp $KOUT/* "$OUT/" 2>/dev/null; grep -E '^BAD' "$OUT/corpus_docker.log" | head; grep -A12 '^{' "$OUT/corpus_docker.log" | grep -E 'honest|forged|statistic'
docker ps -a --format '{{.ID}} {{.Status}} {{.Labels}}' | head
cp $KOUT/* "$OUT/" 2>/dev/null
t "done"
cd "$OUT" && tar czf logs.tgz *.json *.err *.log *.txt 2>/dev/null; ls "$OUT" | head -50
