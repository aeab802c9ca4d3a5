// Smoke test of `switchyard engine` with the official `openai` npm package: a completion, a
// chat completion and the same chat streamed. Usage: node engine_smoke.mjs BASE_URL MODEL
// (BASE_URL ends in /v1). Prints one JSON line with what it saw; exits non-zero on failure.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// The package lives in tests/data/npm/node_modules (scripts/setup_test.sh installs it).
const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../data/npm/package.json"));
const packageDir = path.dirname(require.resolve("openai"));
const { default: OpenAI } = await import(pathToFileURL(path.join(packageDir, "index.mjs")).href);

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 30_000 });

const completion = await client.completions.create({
  model, prompt: "Hello from Node", max_tokens: 8, temperature: 0, ignore_eos: true,
});
assert.equal(completion.object, "text_completion");
assert.equal(completion.choices.length, 1);
assert.equal(completion.choices[0].finish_reason, "length");
assert.equal(completion.usage.completion_tokens, 8);

const chatRequest = {
  model, messages: [{ role: "user", content: "Stream to Node" }], max_tokens: 8,
  temperature: 0, ignore_eos: true,
};
const plainChat = await client.chat.completions.create(chatRequest);
assert.equal(plainChat.object, "chat.completion");
assert.equal(plainChat.choices[0].message.role, "assistant");

const stream = await client.chat.completions.create({
  ...chatRequest, stream: true, stream_options: { include_usage: true },
});
let chatText = "";
let finishReason = null;
let usage = null;
let chunks = 0;
for await (const chunk of stream) {
  chunks += 1;
  assert.equal(chunk.object, "chat.completion.chunk");
  for (const choice of chunk.choices) {
    chatText += choice.delta.content ?? "";
    finishReason = choice.finish_reason ?? finishReason;
  }
  if (chunk.usage) usage = chunk.usage;
}
assert.equal(finishReason, "length");
assert.equal(usage.completion_tokens, 8);
// Greedy: the streamed text is the plain one.
assert.equal(chatText, plainChat.choices[0].message.content);

console.log(JSON.stringify({ completion: completion.choices[0].text, chat: chatText, chunks }));
