#!/usr/bin/env bash
# The main job: sets up what running needs (scripts/setup.sh: build packages and the real
# model), builds the release `switchyard` binary and runs it on the real
# SmolLM2-135M-Instruct (Q4_1 GGUF, fetched by scripts/fetch_model.sh): inspect the model,
# tokenize, render its chat template, and generate a greedy chat reply; then `switchyard up`:
# a local fleet of two engines behind the router, asked for a completion and a streamed chat
# reply over HTTP. It asks "What is the capital of France?" greedily (temperature 0), so the
# answers are the model's own and the same on every run. A bundled tiny model also works
# (scripts/run.sh models/tiny-llama3); its weights are random, so its text is noise.
# Usage: scripts/run.sh [MODEL]   (a model directory or .gguf file; default the real model)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
question="What is the capital of France?"

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
engine_log=$(mktemp)
engine_pid=""
cleanup() {
  rm -f "$messages" "$engine_log"
  if [ -n "$engine_pid" ]; then kill "$engine_pid" 2>/dev/null || true; wait "$engine_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT
cat > "$messages" <<JSON
[{"role": "system", "content": "You are a helpful assistant."},
 {"role": "user", "content": "$question"}]
JSON
echo "== switchyard chat-template --model $model --add-generation-prompt MESSAGES.json"
"$bin" chat-template --model "$model" --add-generation-prompt "$messages"
echo
echo "== switchyard generate --model $model --chat --prompt '$question' -n 48 --temperature 0"
"$bin" generate --model "$model" --chat --prompt "$question" -n 48 --temperature 0
echo

echo "== switchyard up: two engines on $model and a router in front (OpenAI API over HTTP)"
"$bin" up --model "$model" --port 0 >"$engine_log" 2>&1 &
engine_pid=$!
url=""
for _ in $(seq 1 300); do
  url=$(grep -o 'router serving [^ ]* on http://[0-9.]*:[0-9]*' "$engine_log" | grep -o 'http://.*' || true)
  [ -n "$url" ] && break
  kill -0 "$engine_pid" 2>/dev/null || { cat "$engine_log"; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "the fleet did not start"; cat "$engine_log"; exit 1; }
cat "$engine_log"
name=$(basename "$model")
# Over one 16-token KV block, so that the router's prefix index can match it.
prompt="The capital of Germany is Berlin. The capital of Italy is Rome. The capital of France is"
echo "-- POST $url/v1/completions (twice: the same prompt goes to the same engine)"
for _ in 1 2; do
  curl -sS -D - "$url/v1/completions" -H 'content-type: application/json' \
    -d "{\"model\": \"$name\", \"prompt\": \"$prompt\", \"max_tokens\": 16, \"temperature\": 0}" |
    grep -iE '^x-switchyard-endpoint|^\{'
  echo
done
echo "-- POST $url/v1/chat/completions (stream)"
curl -sS -N "$url/v1/chat/completions" -H 'content-type: application/json' \
  -d "{\"model\": \"$name\", \"messages\": [{\"role\": \"user\", \"content\": \"$question\"}], \"max_tokens\": 32, \"temperature\": 0, \"stream\": true}"
echo "-- GET $url/debug/endpoints"
curl -sS "$url/debug/endpoints"
echo
kill -INT "$engine_pid"
wait "$engine_pid"
engine_pid=""
