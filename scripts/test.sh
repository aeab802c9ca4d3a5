#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh: what running needs, with the real model;
# scripts/setup_test.sh: what only the tests need) and runs every test CI runs, in this order:
# format check; the `asan` workflow (clang 14 with -Wthread-safety as an error, ASan+UBSan:
# unit tests, fuzz-corpus replays, one run of each benchmark); clang-tidy on the src/ units
# that changed since they last passed (scripts/tidy.sh, with the asan compile database); the
# Python end-to-end tests against the ASan build of the `switchyard` binary (its CPU kernels
# are compiled -O2, SY_OPTIMIZE_KERNELS, so the long parity runs on the real model take
# minutes, not tens of minutes, and CI builds no release binary for them); then the `tsan`
# tests (only the test binaries whose tests start threads, under TSan).
# Three things take minutes of CPU and are needed late, so they build in the background at
# low CPU priority (scripts/background.sh): the TSan build, which needs only what
# scripts/setup.sh installs, started right after it at the lowest priority (its tests run
# last), so that it takes the cores where nothing else wants them, first during
# setup_test.sh's downloads; and the peers only some end-to-end tests use (guidellm,
# llama.cpp, the Kubernetes tools: pytest's `peer_tools` marker), started next so that their
# downloads overlap the ASan build. The end-to-end tests wait on servers and clients part of
# the time (measured: 11.6 CPU-minutes in 13 minutes, about 0.9 of the two cores), so the
# builds take what they leave and not their share; the `peer_tools` tests run once the peers
# are built, after the others.
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# A stage's line says how long the script has run so far, and the CPU time the commands it
# waited for have used (bash's `times`: a background build counts once it is waited for).
cpu_log=$(mktemp)
stage() {
  times > "$cpu_log"  # a builtin in this shell: in a $(...) subshell it would count nothing
  local cpu
  cpu=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/)
                       printf "%.1f", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) / 60 }' "$cpu_log")
  printf '== [%dm%02ds, %s CPU-min] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$cpu" "$*"
}

bash scripts/setup.sh

# shellcheck source=background.sh
. scripts/background.sh
trap 'background_cleanup; rm -f "$cpu_log"' EXIT

stage "configure the TSan build and build it in the background"
background_start tsan --nice 19 bash -c 'cmake --preset tsan && cmake --build --preset tsan'

bash scripts/setup_test.sh --defer-peer-builds

stage "build the peers in the background: guidellm, llama.cpp, the Kubernetes tools"
background_start guidellm --nice 10 bash scripts/setup_guidellm.sh
background_start llamacpp --nice 10 bash scripts/setup_llamacpp.sh --build-only
background_start kube --nice 10 bash scripts/setup_kube.sh

stage "format check (clang-format-14)"
bash scripts/check_format.sh

stage "configure, build and test under ASan+UBSan with clang's thread-safety analysis"
cmake --workflow --preset asan

stage "clang-tidy on the src/ units that changed since they passed (scripts/tidy.sh)"
bash scripts/tidy.sh

export SWITCHYARD_BIN="$root/build/asan/src/cli/switchyard"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The Kubernetes tools are built by then: a test that cannot find them fails, not skips.
export SWITCHYARD_REQUIRE_KUBE=1
stage "end-to-end tests that need none of the peers"
.venv/bin/python -m pytest -q --durations=20 -m "not peer_tools" tests/e2e "$@"

stage "finish the peers' builds, install llama.cpp into .venv, run the tests that need them"
background_wait guidellm
background_wait llamacpp
background_wait kube
bash scripts/setup_llamacpp.sh
status=0
.venv/bin/python -m pytest -q --durations=20 -m peer_tools tests/e2e "$@" || status=$?
[ "$status" = 0 ] || [ "$status" = 5 ]  # 5: the arguments selected none of them

stage "finish the TSan build and run the threaded test binaries under it"
background_wait tsan
ctest --preset tsan
stage "done"
