#!/usr/bin/env bash
# Builds llama.cpp's own server, optimised for this CPU, as the serving benchmark's
# continuous-batching peer (bench/serving_bench.py --peers ...,llamaserver): the same llama.cpp
# that tools/requirements-fleet.txt's llama-cpp-python vendors, Release (-O3), GGML_NATIVE
# (every ISA extension this CPU has; the tests' llama-server is an -O0 build and does not
# count as a peer for speed). Cached under .cache/tools/llama-server-<version>-<cpu flags
# digest>/, so a later run on the same kind of machine reuses it. Prints the binary's path.
#
# usage: bench/build_llama_server.sh
set -euo pipefail
cd "$(dirname "$0")/.."

pin=$(grep -E '^llama-cpp-python' tools/requirements-fleet.txt)  # name[extras]==version
version=${pin##*==}
cpu=$(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-12)
dest=.cache/tools/llama-server-$version-$cpu
if [ -x "$dest/llama-server" ]; then
  echo "$PWD/$dest/llama-server"
  exit 0
fi
python=.venv/bin/python
[ -x "$python" ] || python=python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "build_llama_server: building llama-server $version -O3 native (minutes)" >&2
"$python" -m pip download -q --no-deps --no-binary llama-cpp-python -d "$work" \
  "llama-cpp-python==$version"
tar xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
if ! { cmake -S "$work"/llama_cpp_python-*/vendor/llama.cpp -B "$work/build" -G Ninja \
         -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
         -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
         -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF &&
       cmake --build "$work/build" --target llama-server -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
     } > "$work/build.log" 2>&1; then
  tail -50 "$work/build.log" >&2
  echo "build_llama_server: build failed" >&2
  exit 1
fi
mkdir -p "$dest"
install -m 755 "$work/build/bin/llama-server" "$dest/llama-server"
echo "$PWD/$dest/llama-server"
