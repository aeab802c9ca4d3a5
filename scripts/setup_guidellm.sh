#!/usr/bin/env bash
# guidellm for its e2e test (tests/e2e/test_guidellm.py), in a venv of its own
# (.venv-guidellm; scripts/setup_test.sh calls this): it needs torch, which PyPI ships for
# Linux with the CUDA libraries (about 6 GB installed: minutes, mostly download), and it pins
# click and multidict below what .venv has. Its own stamp, written only when the install
# finished, so a second run checks and returns in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

stamp=.venv-guidellm/.requirements.sha256
want=$(sha256sum tools/requirements-guidellm.txt | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup_guidellm: installing guidellm into .venv-guidellm (minutes: torch)"
  [ -x .venv-guidellm/bin/python ] || "${PYTHON:-python3}" -m venv .venv-guidellm
  .venv-guidellm/bin/python -m pip install -q --upgrade pip
  .venv-guidellm/bin/python -m pip install -q -r tools/requirements-guidellm.txt
  echo "$want" > "$stamp"
fi
