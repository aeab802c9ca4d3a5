#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh: what running needs, with the real model;
# scripts/setup_test.sh: what only the tests need) and runs every test CI runs, in this order:
# format check; the `asan` workflow (clang 14 with -Wthread-safety as an error, ASan+UBSan:
# unit tests, fuzz-corpus replays, one run of each benchmark); clang-tidy on the src/ units
# that changed since they last passed (scripts/tidy.sh, with the asan compile database); the
# `tsan` workflow (only the test binaries whose tests start threads, under TSan); then the
# Python end-to-end tests against the ASan build of the `switchyard` binary (its CPU kernels
# are compiled -O2, SY_OPTIMIZE_KERNELS, so the long parity runs on the real model take
# minutes, not tens of minutes, and CI builds no release binary for them). Each stage's line
# says how long the script has run so far.
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

stage "build and run the threaded test binaries under TSan"
cmake --workflow --preset tsan

stage "end-to-end tests"
export SWITCHYARD_BIN="$root/build/asan/src/cli/switchyard"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# setup_test.sh built the Kubernetes tools: a test that cannot find them fails, not skips.
export SWITCHYARD_REQUIRE_KUBE=1
.venv/bin/python -m pytest -q tests/e2e "$@"
stage "done"
