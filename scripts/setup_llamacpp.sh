#!/usr/bin/env bash
# llama.cpp as the tests' and benchmarks' peer (scripts/setup_test.sh calls it; the product
# never does), from llama-cpp-python's sdist (PyPI has no wheel of it). One build of the
# llama.cpp the sdist vendors serves both of its servers, once per version and flag set, into
# .cache/llamacpp/<hash>/ (a second run checks and returns in seconds):
#  - lib/: llama.cpp's shared libraries and its own server, llama-server (it has /metrics),
#    Release, tuned to this machine's CPU, every file with the run path $ORIGIN so that they
#    find each other wherever they are copied together. Not for AMX: on CPUs that have it
#    (Sapphire Rapids) llama.cpp's AMX weight buffers take Q4_1 and Q8_0 matmuls and crash
#    decoding SmolLM2 (a general protection fault in libggml-cpu), and they would change the
#    numerics the parity tests compare with. GGML_NATIVE=ON would pass -march=native after
#    our flags and turn AMX back on, so the flags are ours;
#  - the llama-cpp-python wheel without a llama.cpp of its own (LLAMA_BUILD=OFF): its Python
#    code, which loads the libraries from its package's lib/ folder.
# Then installs them into .venv (the wheel with its server extras, lib/ into the installed
# package, llama-server linked into .venv/bin), unless --build-only: scripts/test.sh builds
# while other tests run in .venv and installs (seconds) only once they are done.
# Usage: scripts/setup_llamacpp.sh [--build-only]
set -euo pipefail
cd "$(dirname "$0")/.."

[ -x .venv/bin/python ] || { echo "setup_llamacpp: no .venv: run scripts/setup.sh first" >&2; exit 1; }
LLAMA_ARCH_FLAGS="-march=native -mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
LLAMA_CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=ON \
-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH=\$ORIGIN -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF \
-DLLAMA_OPENSSL=OFF"
LLAMA_WHEEL_CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF"  # the Python package alone
pin=$(grep -E '^llama-cpp-python' tools/requirements-fleet.txt)  # name[extras]==version
# -march=native makes the build this CPU's: its flags are part of the key.
cpu=$(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-16)
key=$( (echo "$pin $cpu"; echo "$LLAMA_ARCH_FLAGS $LLAMA_CMAKE_ARGS $LLAMA_WHEEL_CMAKE_ARGS") |
  sha256sum | cut -c1-16)
built=.cache/llamacpp/$key

if [ ! -x "$built/lib/llama-server" ]; then
  echo "setup_llamacpp: building llama.cpp and llama-cpp-python into $built (minutes)"
  mkdir -p .cache/llamacpp
  work=$(mktemp -d .cache/llamacpp/build.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  # --no-binary names the package: with :all: pip also built every build dependency of the
  # sdist's metadata step from source (scikit-build-core, hatchling, setuptools...): minutes.
  .venv/bin/python -m pip download -q --no-deps --no-binary llama-cpp-python -d "$work" \
    "llama-cpp-python==${pin##*==}"
  sdist=$(echo "$work"/llama_cpp_python-*.tar.gz)
  CMAKE_ARGS="$LLAMA_WHEEL_CMAKE_ARGS" \
    .venv/bin/python -m pip wheel -q --no-deps --no-cache-dir -w "$work/out" "$sdist"
  tar xzf "$sdist" -C "$work"
  # llama-server's dependencies are the libraries the Python package loads (llama, ggml,
  # ggml-base, ggml-cpu) and its own (common, mtmd): this target builds them all.
  # shellcheck disable=SC2086  # the flags are words
  if ! { CFLAGS="$LLAMA_ARCH_FLAGS" CXXFLAGS="$LLAMA_ARCH_FLAGS" \
           cmake -S "$work"/llama_cpp_python-*/vendor/llama.cpp -B "$work/build" -G Ninja \
           $LLAMA_CMAKE_ARGS &&
         cmake --build "$work/build" --target llama-server -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
       } > "$work/build.log" 2>&1; then
    tail -50 "$work/build.log"
    echo "setup_llamacpp: building llama.cpp failed" >&2
    exit 1
  fi
  mkdir "$work/out/lib"
  cp -a "$work"/build/bin/lib*.so* "$work/out/lib/"
  install -m 755 "$work/build/bin/llama-server" "$work/out/lib/llama-server"
  rm -rf "$built"
  mv "$work/out" "$built"  # last, so that a stopped build leaves no folder that looks done
fi
[ "${1:-}" = --build-only ] && exit 0

stamp=.venv/.requirements-fleet
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$key" ] || [ ! -x .venv/bin/llama-server ]; then
  echo "setup_llamacpp: installing llama-cpp-python and llama-server into .venv"
  wheel=$(echo "$built"/llama_cpp_python-*.whl)
  extras=$(sed -n 's/^[^[]*\[\([^]]*\)\].*/\1/p' <<<"$pin")
  # The wheel is Python only: an installed llama-cpp-python of the same version has the same
  # files, whatever built it; the libraries are ours either way.
  .venv/bin/python -m pip install -q "$wheel${extras:+[$extras]}"
  package=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')/llama_cpp
  mkdir -p "$package/lib"
  cp -a "$built"/lib/. "$package/lib/"
  ln -sf "$package/lib/llama-server" .venv/bin/llama-server  # $ORIGIN: the link's target
  echo "$key" > "$stamp"
fi
