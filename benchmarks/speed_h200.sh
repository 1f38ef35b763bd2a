#!/usr/bin/env bash
# Issue 25's figures on the H200 in one call (at most 9 minutes), everything in one tarball under $OUT:
#
#   bash benchmarks/speed_h200.sh      (repo root; .whl carried: see prepare_device_copy.sh)
#
# 1. cli_eval_speed.py: `cuda-agent eval --json` cold (starts the judge service), warm, and cold with cached
#    baselines (results written after every call, so a cut run keeps what it measured);
# 2. eval_speed.py: the round trip after an edit, with judges of the process's own;
# 3. score_throughput.py at 8 in flight, with NVML's busy fraction;
# 4. the core GPU tests (GPUTESTS=0 skips them).
# The journal of the run (every evaluation with its phases) and the judges' log tails go in the tarball too:
# a step cut by its limit still leaves its evaluations there. Limits per step: T1..T4 seconds.
set -u
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export CUDA_AGENT_CACHE=${CUDA_AGENT_CACHE:-/tmp/speed-cache} PYTHONUNBUFFERED=1
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
OUT=${OUT:-/tmp/speed-out}
R=/tmp/speed-results; rm -rf "$R"; mkdir -p "$R" "$OUT"; S=$R/summary.txt
step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS
  timeout -s INT -k 10 "$limit" "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s $(grep -E '[0-9]+ (passed|failed)' "$R/$name.log" | tail -1)" | tee -a "$S"; }
step cli "${T1:-150}" python3 benchmarks/cli_eval_speed.py --warm 2 --out "$R/cli_eval_speed.json"
step eval_speed "${T2:-90}" python3 benchmarks/eval_speed.py --edits 4 --repeats 3 --out "$R/eval_speed.json"
step score8 "${T3:-120}" env CUDA_AGENT_JUDGE_SERVICE=off python3 benchmarks/score_throughput.py --solutions 16 --concurrency 8 --out "$R/score8.json"
[ "${GPUTESTS:-1}" = 1 ] && step gpu_core "${T4:-170}" python3 -m pytest -m gpu tests/gpu/test_principles_gpu.py tests/gpu/test_examples_gpu.py tests/gpu/test_evaluation_gpu.py -q -p no:cacheprovider --timeout 150 -rfE
python3 -m cuda_agent_mcp judges stop > /dev/null 2>&1
cp "$CUDA_AGENT_CACHE/journal.sqlite" "$R/" 2>/dev/null
find "$CUDA_AGENT_CACHE/logs" -name '*.log' 2>/dev/null | head -60 | while read -r f; do echo "== $f"; tail -c 2500 "$f"; done > "$R/judge_logs.txt"
grep -h '"warm_median_s\|"round_trip_after_cu_edit_median_s\|first_cached_profile_over_next\|evaluations_per_s\|gpu_busy' "$R"/*.json >> "$S" 2>/dev/null
tar czf "$OUT/speed_h200_$BENCH_COMMIT.tgz" -C "$(dirname "$R")" "$(basename "$R")"
cat "$S"
