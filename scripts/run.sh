#!/usr/bin/env bash
# The main job, as it stands today: sets up, builds the release `switchyard` binary and runs
# it on the bundled tiny model (inspect the model, tokenize, render its chat template, and
# generate a streamed chat reply; the tiny model has random weights, so the text is noise).
# It becomes `switchyard up` (a local fleet) once the engine and router exist.
# Usage: scripts/run.sh [MODEL_DIR]   (default models/tiny-llama3)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-models/tiny-llama3}

bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target switchyard
bin=build/release/src/cli/switchyard

echo "== switchyard model inspect $model"
"$bin" model inspect "$model"
echo
echo "== switchyard tokenize --model $model 'Hello, Switchyard! 12345 héllo 🚂'"
"$bin" tokenize --model "$model" "Hello, Switchyard! 12345 héllo 🚂"
echo
messages=$(mktemp)
trap 'rm -f "$messages"' EXIT
cat > "$messages" <<'JSON'
[{"role": "system", "content": "You are a helpful assistant."},
 {"role": "user", "content": "Which train goes to the yard?"}]
JSON
echo "== switchyard chat-template --model $model --add-generation-prompt MESSAGES.json"
"$bin" chat-template --model "$model" --add-generation-prompt "$messages"
echo
echo "== switchyard generate --model $model --chat --prompt 'Which train goes to the yard?' -n 32"
"$bin" generate --model "$model" --chat --prompt "Which train goes to the yard?" -n 32
echo
