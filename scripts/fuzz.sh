#!/usr/bin/env bash
# Fuzzes every target with libFuzzer (clang preset, ASan+UBSan) for SECONDS each (default 180),
# starting from and adding to its committed corpus in a scratch copy. Crashes are left in
# build/clang/fuzz-findings/<target>/; add each (minimised) to tests/fuzz/<target>_corpus/ once fixed.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-180}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(ls tests/fuzz/*_fuzz.cc | xargs -n1 basename | sed 's/_fuzz\.cc$//')
fi
cmake --preset clang >/dev/null
cmake --build --preset clang --target "${targets[@]/#/sy_fuzz_}"
status=0
for t in "${targets[@]}"; do
  work=build/clang/fuzz-work/$t findings=build/clang/fuzz-findings/$t
  rm -rf "$work"; mkdir -p "$work" "$findings"
  cp -r "tests/fuzz/${t}_corpus/." "$work/"
  echo "== fuzzing $t for ${seconds}s"
  if ! "build/clang/tests/fuzz/sy_fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$findings/" -print_final_stats=1 "$work" 2>"build/clang/fuzz-$t.log"; then
    echo "!! $t: finding in $findings (log build/clang/fuzz-$t.log)"; status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "build/clang/fuzz-$t.log" || true
done
exit $status
