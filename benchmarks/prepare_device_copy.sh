#!/usr/bin/env bash
# Make this working tree ready to be copied to a GPU machine without network access (the lent H200 of
# benchmarks/results: Python 3.12, torch, no pydantic), so that the acceptance run is one call there:
#
#   bash benchmarks/prepare_device_copy.sh            (here, in the repository root; needs pip and ../shared)
#   then, there, with .whl and .device carried:       QUICK=1 bash benchmarks/gpu_acceptance.sh
#
# - .device/kernelbench: KernelBench's level-1 and level-2 problems (KB_SOURCE, default
#   ../shared/benchmarks/kernelbench), which gpu_acceptance.sh reads by default;
# - .whl: the wheels of what the machine lacks (PACKAGES), for CPython 3.12 on x86_64; gpu_acceptance.sh
#   installs them into /tmp/site.
# Both are ignored by git (.git/info/exclude), so they never reach a commit.
set -euo pipefail
cd "$(dirname "$0")/.."
KB_SOURCE=${KB_SOURCE:-../shared/benchmarks/kernelbench}
PACKAGES=${PACKAGES:-"pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2"}

for ignored in /.whl/ /.device/; do
  grep -qxF "$ignored" .git/info/exclude 2>/dev/null || echo "$ignored" >> .git/info/exclude
done

if [ ! -d "$KB_SOURCE/level1" ]; then
  echo "error: no KernelBench problems at $KB_SOURCE (set KB_SOURCE to a directory holding level1 and level2)" >&2
  exit 2
fi
rm -rf .device/kernelbench
mkdir -p .device/kernelbench
cp -r "$KB_SOURCE/level1" "$KB_SOURCE/level2" .device/kernelbench/

rm -rf .whl
# shellcheck disable=SC2086  # PACKAGES is a list of requirements
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl $PACKAGES
echo "ready: $(ls .device/kernelbench/level1 | wc -l) + $(ls .device/kernelbench/level2 | wc -l) problems," \
  "$(ls .whl | wc -l) wheels ($(du -sh .whl | cut -f1)); carry [\".whl\", \".device\"]"
