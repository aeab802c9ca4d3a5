#!/usr/bin/env bash
# llama.cpp as the tests' peer (scripts/setup_test.sh calls it; the product never does), from
# llama-cpp-python's sdist (PyPI has no wheel of it), in two parts, each built once per version
# and flag set into .cache/llamacpp/<hash>/ (a second run checks and returns in seconds):
#  - llama-cpp-python with its server, as a wheel: only the shared libraries the Python
#    package loads (no llama.cpp tools, examples, tests, server binary or multimodal library),
#    tuned to this machine's CPU, as the serving benchmark's peer wants them, except for AMX:
#    on CPUs that have it (Sapphire Rapids) llama.cpp's AMX weight buffers take Q4_1 and Q8_0
#    matmuls and crash decoding SmolLM2 (a general protection fault in libggml-cpu), and they
#    would change the numerics the parity tests compare with. GGML_NATIVE=ON would pass
#    -march=native after our flags and turn AMX back on, so the flags are ours;
#  - llama.cpp's own server, llama-server (it has /metrics), from the llama.cpp the sdist
#    vendors: that target only, static. Built at -O0 for the generic CPU: the tests serve a
#    two-layer model, and it builds in about half the time of -O3.
# Then installs both into .venv (the wheel with its server extras; llama-server into
# .venv/bin), unless --build-only: scripts/test.sh builds while other tests run in .venv and
# installs (seconds) only once they are done.
# Usage: scripts/setup_llamacpp.sh [--build-only]
set -euo pipefail
cd "$(dirname "$0")/.."

[ -x .venv/bin/python ] || { echo "setup_llamacpp: no .venv: run scripts/setup.sh first" >&2; exit 1; }
LLAMA_ARCH_FLAGS="-march=native -mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF"
LLAMA_SERVER_CMAKE_ARGS="-DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS=-O0 -DCMAKE_CXX_FLAGS=-O0 \
-DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF"
pin=$(grep -E '^llama-cpp-python' tools/requirements-fleet.txt)  # name[extras]==version
# -march=native makes the build this CPU's: its flags are part of the key.
cpu=$(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-16)
key=$( (echo "$pin $cpu"; echo "$LLAMA_ARCH_FLAGS $LLAMA_CMAKE_ARGS"; echo "$LLAMA_SERVER_CMAKE_ARGS") |
  sha256sum | cut -c1-16)
built=.cache/llamacpp/$key

if [ ! -f "$built/llama-server" ]; then
  echo "setup_llamacpp: building llama-cpp-python and llama-server into $built (minutes)"
  mkdir -p .cache/llamacpp
  work=$(mktemp -d .cache/llamacpp/build.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  # --no-binary names the package: with :all: pip also built every build dependency of the
  # sdist's metadata step from source (scikit-build-core, hatchling, setuptools...): minutes.
  .venv/bin/python -m pip download -q --no-deps --no-binary llama-cpp-python -d "$work" \
    "llama-cpp-python==${pin##*==}"
  sdist=$(echo "$work"/llama_cpp_python-*.tar.gz)
  CFLAGS="$LLAMA_ARCH_FLAGS" CXXFLAGS="$LLAMA_ARCH_FLAGS" CMAKE_ARGS="$LLAMA_CMAKE_ARGS" \
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
    .venv/bin/python -m pip wheel -q --no-deps --no-cache-dir -w "$work/out" "$sdist"
  tar xzf "$sdist" -C "$work"
  # shellcheck disable=SC2086  # the flags are words
  if ! { cmake -S "$work"/llama_cpp_python-*/vendor/llama.cpp -B "$work/build" -G Ninja \
           $LLAMA_SERVER_CMAKE_ARGS &&
         cmake --build "$work/build" --target llama-server -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
       } > "$work/build.log" 2>&1; then
    tail -50 "$work/build.log"
    echo "setup_llamacpp: building llama-server failed" >&2
    exit 1
  fi
  install -m 755 "$work/build/bin/llama-server" "$work/out/llama-server"
  rm -rf "$built"
  mv "$work/out" "$built"  # last, so that a stopped build leaves no folder that looks done
fi
[ "${1:-}" = --build-only ] && exit 0

stamp=.venv/.requirements-fleet
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$key" ] || [ ! -x .venv/bin/llama-server ]; then
  echo "setup_llamacpp: installing llama-cpp-python and llama-server into .venv"
  wheel=$(echo "$built"/llama_cpp_python-*.whl)
  extras=$(sed -n 's/^[^[]*\[\([^]]*\)\].*/\1/p' <<<"$pin")
  # The wheel itself replaces any build of the same version; then its extras' packages.
  .venv/bin/python -m pip install -q --force-reinstall --no-deps "$wheel"
  .venv/bin/python -m pip install -q "$wheel${extras:+[$extras]}"
  install -m 755 "$built/llama-server" .venv/bin/llama-server
  echo "$key" > "$stamp"
fi
