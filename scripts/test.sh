#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh) and runs every test CI runs, in this order:
# format check, unit tests and fuzz-corpus replays under ASan+UBSan (the `asan` workflow),
# then the Python end-to-end tests against the ASan build of the `switchyard` binary.
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bash scripts/setup.sh

# guidellm for its e2e test (tests/e2e/test_guidellm.py), here and not in setup.sh (the main
# job, scripts/run.sh, does not need it), in a venv of its own: it needs
# torch, which PyPI ships for Linux with the CUDA libraries (about 6 GB installed), and it pins
# click and multidict below what .venv has. Its own stamp, so .venv is not reinstalled for it.
guidellm_stamp=.venv-guidellm/.requirements.sha256
want=$(sha256sum tools/requirements-guidellm.txt | cut -d' ' -f1)
if [ ! -f "$guidellm_stamp" ] || [ "$(cat "$guidellm_stamp")" != "$want" ]; then
  echo "setup: installing guidellm into .venv-guidellm (minutes: torch)"
  [ -x .venv-guidellm/bin/python ] || "${PYTHON:-python3}" -m venv .venv-guidellm
  .venv-guidellm/bin/python -m pip install -q --upgrade pip
  .venv-guidellm/bin/python -m pip install -q -r tools/requirements-guidellm.txt
  echo "$want" > "$guidellm_stamp"
fi

echo "== format check (clang-format-14)"
bash scripts/check_format.sh

echo "== configure, build and unit-test under ASan+UBSan"
cmake --workflow --preset asan

echo "== end-to-end tests"
export SWITCHYARD_BIN="$root/build/asan/src/cli/switchyard"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
.venv/bin/python -m pytest -q tests/e2e "$@"
