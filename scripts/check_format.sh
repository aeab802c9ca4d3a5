#!/usr/bin/env bash
# Fails when any C++ file in src/, tests/ or bench/ is not formatted per .clang-format
# (clang-format 14). With --fix, rewrites them in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=(--dry-run --Werror)
[ "${1:-}" = "--fix" ] && mode=(-i)
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc' 'bench/*.h')
[ ${#files[@]} -eq 0 ] && exit 0
clang-format-14 "${mode[@]}" "${files[@]}"
echo "format: ${#files[@]} files ok"
