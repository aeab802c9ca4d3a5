#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh: what running needs, with the real model;
# scripts/setup_test.sh: what only the tests need) and runs every test CI runs, in this order:
# format check, unit tests and fuzz-corpus replays under ASan+UBSan (the `asan` workflow),
# then the Python end-to-end tests against the ASan build of the `switchyard` binary (and,
# for the long parity runs on the real model, the release build: SWITCHYARD_OPTIMIZED_BIN).
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bash scripts/setup.sh
bash scripts/setup_test.sh

echo "== format check (clang-format-14)"
bash scripts/check_format.sh

echo "== configure, build and unit-test under ASan+UBSan"
cmake --workflow --preset asan

echo "== build the release switchyard (the real-model parity runs: ~10x faster than ASan)"
cmake --preset release >/dev/null
cmake --build --preset release --target switchyard

echo "== end-to-end tests"
export SWITCHYARD_BIN="$root/build/asan/src/cli/switchyard"
export SWITCHYARD_OPTIMIZED_BIN="$root/build/release/src/cli/switchyard"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
.venv/bin/python -m pytest -q tests/e2e "$@"
