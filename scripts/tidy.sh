#!/usr/bin/env bash
# Runs clang-tidy 14 (checks in .clang-tidy) on every translation unit under src/ whose content
# changed since it last passed, and fails, printing the findings, if any has one.
# A unit's key is the SHA-256 of its preprocessed text (`clang++ -E -C` with the flags of the
# asan preset's compile database less its precompiled header, with comments, so a removed
# NOLINT counts), its compile flags, .clang-tidy and clang-tidy's version; a unit that passes
# leaves an empty file named by its key in .cache/tidy/, and a unit whose key is there is
# skipped. A change to a header thus re-checks every unit that includes it; an empty cache
# checks everything.
# The clang static analyzer (clang-analyzer-*) takes two thirds of clang-tidy's time, so only
# --all runs it; --all also checks every unit, cached or not. What passes --all passes the
# cached checks too, so it records its keys as well.
# .ci/tidy-passed, committed, lists the keys of the units as they were when someone last ran
# `scripts/tidy.sh --record` on a clean tree: a clean checkout (CI) skips those too, so it
# checks only what changed since. A stale list costs time, never a missed finding.
# Usage: scripts/tidy.sh [--all | --record]
# Environment: TIDY_JOBS (parallel clang-tidy runs; default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
cached_checks=--checks=-clang-analyzer-*
use_cache=1
tidy_args=$cached_checks
record=0
case "${1:-}" in
  --all) use_cache=0 tidy_args= ;;
  --record) record=1 ;;
  "") ;;
  *) echo "usage: scripts/tidy.sh [--all | --record]" >&2; exit 2 ;;
esac
passed=$root/.ci/tidy-passed
[ -f "$passed" ] || : >"$passed"

db=build/asan/compile_commands.json
[ -f "$db" ] || cmake --preset asan >/dev/null
cache=.cache/tidy
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The common part of every key: the checks a cached pass stands for and the tool that ran them.
{ cat .clang-tidy; echo "$cached_checks"; clang-tidy-14 --version; } | sha256sum | cut -d' ' -f1 >"$work/config_key"

# The compile database without the precompiled header (SY_PRECOMPILE_HEADERS), so that each
# unit is checked, and keyed, as it compiles on its own: an include it lacks is an error here;
# a batch of a unity build (SY_UNITY_BUILD) becomes its units again, each with the command it
# has in a build without batches. Then one line per unit in scope: its source file, then its
# compile command (compiler first).
python3 - "$db" "$root/src/" "$work/compile_commands.json" >"$work/units" <<'EOF'
import json, os, re, shlex, sys
db, prefix, out = sys.argv[1], sys.argv[2], sys.argv[3]
def units_of(entry):
    batch = entry["file"]
    if not re.search(r"/CMakeFiles/[^/]+\.dir/Unity/unity_\d+_cxx\.cxx$", batch):
        return [entry]
    # The batch's object, e.g. src/kvx/CMakeFiles/sy_kvx.dir/Unity/unity_0_cxx.cxx.o; a unit's
    # is the target's folder plus its path under the target's source folder (src/kvx).
    target_dir = os.path.relpath(os.path.dirname(os.path.dirname(batch)), entry["directory"])
    source_dir = os.path.join(os.path.dirname(prefix.rstrip("/")), target_dir.split("/CMakeFiles/")[0])
    batch_object = f"{target_dir}/Unity/{os.path.basename(batch)}.o"
    units = []
    for source in re.findall(r'^#include "([^"]+)"$', open(batch).read(), re.M):
        unit_object = f"{target_dir}/{os.path.relpath(source, source_dir)}.o"
        command = entry["command"].replace(batch_object, unit_object).replace(batch, source)
        units.append({"directory": entry["directory"], "command": command, "file": source})
    return units
def without_pch(args):
    kept, i = [], 0
    while i < len(args):
        if (args[i] == "-Xclang" and i + 3 < len(args) and args[i + 1] in ("-include-pch", "-include")
                and args[i + 3].rsplit("/", 1)[-1].startswith("cmake_pch.hxx")):
            i += 4
            continue
        if args[i] != "-Winvalid-pch":
            kept.append(args[i])
        i += 1
    return kept
entries = [unit for entry in json.load(open(db)) for unit in units_of(entry)]
for entry in entries:
    args = entry.pop("arguments", None) or shlex.split(entry.pop("command"))
    entry["arguments"] = without_pch(args)
json.dump(entries, open(out, "w"))
for entry in entries:
    if entry["file"].startswith(prefix) and entry["file"].endswith(".cc"):
        print(entry["file"], entry["directory"], shlex.join(entry["arguments"]), sep="\t")
EOF

# Checks one unit (its units line on stdin). Prints "skipped <key>" or "passed <key>", or
# writes its findings to a $work/findings.* file.
check_unit() {
  local file dir command key out
  IFS=$'\t' read -r file dir command
  command=$(sed 's/ -o [^ ]*//' <<<"$command")
  # Paths are made relative to the checkout, so that a cache restored into another checkout
  # path still matches.
  key=$( {
    cat "$work/config_key"
    sed "s|$root/||g" <<<"$command"
    (cd "$dir" && eval "$command -E -C -o -" | sed "s|$root/||g")
  } | sha256sum | cut -d' ' -f1)
  if [ "$use_cache" = 1 ] && { [ -e "$cache/$key" ] || grep -qxF "$key" "$passed"; }; then
    echo "skipped $key"
  elif out=$(clang-tidy-14 -p "$work" --quiet ${tidy_args:+"$tidy_args"} "$file" 2>&1) &&
    ! grep -q ': \(warning\|error\): ' <<<"$out"; then
    touch "$cache/$key"
    echo "passed $key"
  else
    printf '%s\n%s\n' "== ${file#"$root"/}" "$(grep -v '^[0-9]* warnings\? generated\.$' <<<"$out")" \
      >"$(mktemp "$work/findings.XXXXXX")"
  fi
}
export -f check_unit
export work root use_cache cache tidy_args passed

total=$(wc -l <"$work/units")
start=$SECONDS
# One xargs job per unit; the lines of those that pass go to $work/clean.
tr '\n' '\0' <"$work/units" |
  xargs -0 -n1 -P "${TIDY_JOBS:-$(nproc)}" bash -c 'check_unit <<<"$1"' _ >"$work/clean"

# The cache keeps only the keys of the units as they are now.
cut -d' ' -f2 "$work/clean" | sort -u >"$work/keys"
find "$cache" -type f -printf '%f\n' | sort | comm -23 - "$work/keys" |
  (cd "$cache" && xargs -r rm -f)

skipped=$(grep -c '^skipped' "$work/clean" || true)
summary="$total units, $skipped unchanged since they passed, $((SECONDS - start)) s"
shopt -s nullglob
findings=("$work"/findings.*)
if [ ${#findings[@]} -gt 0 ]; then
  cat "${findings[@]}"
  echo "tidy: findings in ${#findings[@]} units ($summary)"
  exit 1
fi
echo "tidy: clean ($summary)"
if [ "$record" = 1 ]; then
  cp "$work/keys" "$passed"
  echo "tidy: recorded $(wc -l <"$passed") passing units in .ci/tidy-passed"
fi
