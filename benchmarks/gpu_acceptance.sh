#!/usr/bin/env bash
# The GPU acceptance run (issue 23): on one GPU, from a fresh copy of the repository, as a user runs it.
#
#   bash benchmarks/gpu_acceptance.sh        (repo root; KB=<KernelBench tree>, default .device/kernelbench)
#
# 1. the bundled examples through the CLI (`python -m cuda_agent_mcp eval <copy> --json`), cold, while the
#    corpus builds in parallel (build cache shared);
# 2. the honest corpus sample and the clock forgeries (benchmarks/acceptance.py);
# 3. the red team's timing tests and the judge-as-another-uid test (pytest -m gpu);
# 4. eval_speed.py (round trip after an edit) and a short reward repeat run.
# Prints one summary table and exits non-zero on any false reject, crash or missed exploit. Logs and JSON
# go to $OUT (default /tmp/acceptance). Missing Python packages travel as wheels in .whl (pydantic).
set -u
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export CUDA_AGENT_CACHE=${CUDA_AGENT_CACHE:-/tmp/acceptance-cache} PYTHONUNBUFFERED=1
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
OUT=${OUT:-/tmp/acceptance}
KB=${KB:-.device/kernelbench}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
failed=0
started=$SECONDS
record() {  # name rc seconds detail
  printf '%-28s %-6s %5ss  %s\n' "$1" "$([ "$2" = 0 ] && echo ok || echo FAIL:$2)" "$3" "$4" | tee -a "$SUMMARY"
  [ "$2" = 0 ] || failed=1
}
step() {  # name limit_s command...
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  timeout -s INT -k 10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  record "$name" "$rc" "$((SECONDS - t0))" "$(grep -E '[0-9]+ (passed|failed)' "$OUT/$name.log" | tail -1)"
}
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader > "$OUT/gpu.txt" 2>&1

# 1. The examples as a user runs them (cold CLI, root, a copy outside the repository), in the background.
examples=/tmp/acceptance-examples
rm -rf "$examples"; mkdir -p "$examples"
(
  for name in relu bias_add_relu row_sum; do
    cp -r "examples/$name" "$examples/$name"
    t0=$SECONDS
    (cd / && timeout 150 python3 -m cuda_agent_mcp eval "$examples/$name" --json > "$OUT/cli_$name.json" 2> "$OUT/cli_$name.err")
    echo "$name $? $((SECONDS - t0))" >> "$OUT/cli_status.txt"
  done
) &
cli=$!
t0=$SECONDS
python3 benchmarks/acceptance.py --kernelbench "$KB" --out "$OUT/acceptance.json" --build-only > "$OUT/build.log" 2>&1
record build $? $((SECONDS - t0)) "$(tail -1 "$OUT/build.log")"
wait $cli
while read -r name rc seconds; do
  detail=$(python3 - "$OUT/cli_$name.json" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as exc:
    print(f"no JSON ({exc})"); raise SystemExit(1)
if "error" in d:
    print(f"error: {d['error'].get('message', '')[:160]}"); raise SystemExit(1)
p = d.get("profile") or {}
v = (p.get("verdict") or d["verify"]["verdict"])
print(f"reward {d['reward']} profile {v['status']} {v.get('reason', '')} "
      f"x{(p.get('speedup_vs_eager') or 0):.3f} eager x{(p.get('speedup_vs_compile') or 0):.3f} compile "
      f"stat {((p.get('candidate') or {}).get('hidden_fraction'))}")
raise SystemExit(0 if d["reward"] >= 1 else 1)
EOF
)
  check=$?
  record "cli eval $name" "$([ "$rc" = 0 ] && echo $check || echo "$rc")" "$seconds" "$detail"
done < "$OUT/cli_status.txt"

# 2. The honest corpus sample and the forgeries (builds are cache hits now).
step corpus "${CORPUS_LIMIT:-300}" python3 benchmarks/acceptance.py --kernelbench "$KB" --out "$OUT/acceptance.json"
grep -E '^BAD' "$OUT/corpus.log" | head -20 | sed 's/^/    /' | tee -a "$SUMMARY"
grep -A12 '^{' "$OUT/corpus.log" | grep -E 'honest|forged|statistic' | sed 's/^/    /' | tee -a "$SUMMARY"

# 3. Rewards that repeat, short (the long run is a benchmark: reward_repeats.py --repeats 20).
step repeats "${REPEATS_LIMIT:-100}" python3 benchmarks/reward_repeats.py --repeats "${REPEATS:-3}" --concurrency 1 --concurrency 3 \
  --out "$OUT/reward_repeats.json"

# 4. Unless QUICK=1 (a session short of GPU time): the red team's timing attacks, the judge as a uid with
#    no passwd entry measuring baselines, the round trip after an edit, and an honest kernel on a small task.
if [ "${QUICK:-0}" != 1 ]; then
  step redteam 200 python3 -m pytest -m gpu tests/redteam/test_timing.py tests/gpu/test_judge_user_gpu.py \
    -q -p no:cacheprovider --timeout 150 -rfE
  step eval_speed 120 python3 benchmarks/eval_speed.py --edits 2 --repeats 1 --out "$OUT/eval_speed.json"
  # A small task (1 MB, 44 calls a batch): its profiles were infrastructure failures, then memory verdicts.
  step small_task 150 python3 -m pytest -m gpu tests/gpu/test_evaluation_gpu.py -k small_task \
    -q -p no:cacheprovider --timeout 140 -rfE
fi

echo "acceptance at $BENCH_COMMIT: $((SECONDS - started)) s, $([ $failed = 0 ] && echo passed || echo FAILED)" | tee -a "$SUMMARY"
exit $failed
