#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh: what running needs, with the real model;
# scripts/setup_test.sh: what only the tests need) and runs every test CI runs, in this order:
# format check; the `asan` workflow (clang 14 with -Wthread-safety as an error, ASan+UBSan:
# unit tests, fuzz-corpus replays, one run of each benchmark); clang-tidy on the src/ units
# that changed since they last passed (scripts/tidy.sh, with the asan compile database); the
# Python end-to-end tests against the ASan build of the `switchyard` binary (its CPU kernels
# are compiled -O2, SY_OPTIMIZE_KERNELS, so the long parity runs on the real model take
# minutes, not tens of minutes, and CI builds no release binary for them); then the `tsan`
# tests (only the test binaries whose tests start threads, under TSan). The TSan build runs
# beside the end-to-end tests, at the lowest CPU priority: those tests mostly wait on
# servers and clients (about half a core of the two on average), so the build takes the idle
# time and not theirs. Each stage's line says how long the script has run so far.
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

stage() { printf '== [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

bash scripts/setup.sh
bash scripts/setup_test.sh

stage "format check (clang-format-14)"
bash scripts/check_format.sh

stage "configure, build and test under ASan+UBSan with clang's thread-safety analysis"
cmake --workflow --preset asan

stage "clang-tidy on the src/ units that changed since they passed (scripts/tidy.sh)"
bash scripts/tidy.sh

stage "configure the TSan build; build it in the background, niced, beside the e2e tests"
cmake --preset tsan
tsan_log=$(mktemp)
# Its own session (setsid), so that stopping it on a failure reaches ninja and the compilers.
setsid nice -n 19 cmake --build --preset tsan >"$tsan_log" 2>&1 &
tsan_build=$!
trap 'kill -- -"$tsan_build" 2>/dev/null || true; rm -f "$tsan_log"' EXIT

stage "end-to-end tests"
export SWITCHYARD_BIN="$root/build/asan/src/cli/switchyard"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# setup_test.sh built the Kubernetes tools: a test that cannot find them fails, not skips.
export SWITCHYARD_REQUIRE_KUBE=1
.venv/bin/python -m pytest -q tests/e2e "$@"

stage "finish the TSan build and run the threaded test binaries under it"
status=0
wait "$tsan_build" || status=$?
if [ "$status" != 0 ]; then
  cat "$tsan_log"
  echo "test.sh: the TSan build failed" >&2
  exit 1
fi
tail -n 5 "$tsan_log"
ctest --preset tsan
stage "done"
