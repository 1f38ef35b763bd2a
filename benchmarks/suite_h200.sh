#!/usr/bin/env bash
# The suite figures on the H200, one stage per call (each under the device's 10-minute limit; the suite
# and baseline stages resume where a cut call stopped, so calling a stage again continues it).
#
#   bash benchmarks/suite_h200.sh workspaces    # 36 tasks, cuda-agent rules, baselines recorded (most value)
#   bash benchmarks/suite_h200.sh kernelbench   # 22 KernelBench single files, kernelbench rules
#   bash benchmarks/suite_h200.sh gpu-tests     # tests/gpu/test_bench_gpu.py
#   bash benchmarks/suite_h200.sh throughput    # 100 level-1 solutions, baselines cached (after workspaces)
#   bash benchmarks/suite_h200.sh baselines     # the 250-problem table, as far as the call gets
#
# Needs KernelBench's problems in $KB (default .device/kernelbench: copy ../shared/benchmarks/kernelbench
# there, ignored by git, and carry .device). Everything a stage writes is copied to $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/.."
KB=${KB:-.device/kernelbench}
WORK=.device
LIMIT=${LIMIT:-560}
mkdir -p "$WORK/baselines"
stage=${1:?stage: workspaces, kernelbench, gpu-tests, throughput or baselines}
# SIGINT first: the run writes its report and says how to continue; SIGKILL 30 s later if it hangs.
bounded() { timeout -s INT -k 30 "$LIMIT" "$@"; echo "exit $?"; }
case "$stage" in
  workspaces)
    bounded python -m cuda_agent_mcp bench run --tasks "$KB" --solutions benchmarks/suites/workspaces \
      --only-with-solutions --rules cuda-agent --out "$WORK/suite_workspaces" --baselines "$WORK/baselines" \
      --record-baselines "$WORK/baselines" --trials 3 --budget 1 ;;
  kernelbench)
    bounded python -m cuda_agent_mcp bench run --tasks "$KB" --solutions benchmarks/suites/kernelbench_singlefile \
      --format kernelbench --only-with-solutions --rules kernelbench --out "$WORK/suite_kernelbench" \
      --baselines "$WORK/baselines" --record-baselines "$WORK/baselines" --trials 3 --budget 1 ;;
  gpu-tests)
    bounded python -m pytest tests/gpu/test_bench_gpu.py -q -p no:cacheprovider ;;
  throughput)
    bounded python benchmarks/suite_throughput.py --tasks 100 --kernelbench "$KB" --baselines "$WORK/baselines" \
      --trials 3 --budget 1 --out "$WORK/suite_throughput.json" ;;
  baselines)
    bounded python -m cuda_agent_mcp bench baselines --tasks "$KB" --table-dir "$WORK/baselines" --budget 1 \
      --compare "$KB/baseline_timing/H100_Modal/baseline_time_torch.json" --json > "$WORK/baselines_run.json"
    cat "$WORK/baselines_run.json" | head -c 2000 ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
for run in "$WORK"/suite_workspaces "$WORK"/suite_kernelbench; do
  [ -d "$run" ] && python benchmarks/suite_overhead.py "$run" --out "$run/overhead.json" >/dev/null 2>&1
done
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  cp -r "$WORK"/baselines "$OUT"/ 2>/dev/null
  for item in suite_workspaces suite_kernelbench suite_throughput.json baselines_run.json; do
    [ -e "$WORK/$item" ] && cp -r "$WORK/$item" "$OUT"/
  done
  rm -rf "$OUT"/suite_*/work
fi
