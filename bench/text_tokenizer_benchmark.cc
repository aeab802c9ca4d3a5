// Encode and Decode throughput of a tokenizer.json tokenizer, by default the bundled tiny
// Llama-3 one (models/tiny-llama3). Pass --tokenizer=PATH to measure another tokenizer.json.
// CI runs it once as a smoke test; timings on shared runners are not a gate.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"

#include "text/tokenizer.h"

namespace switchyard::text {
namespace {

std::string& TokenizerPath() {
  static std::string path = std::string(SY_SOURCE_DIR) + "/models/tiny-llama3/tokenizer.json";
  return path;
}

// Mixed prose, code, digits and non-Latin text, `copies` paragraphs. With `distinct` each
// paragraph also gets numbered identifiers that occur once in the text, so the first
// iteration misses the word cache more often (later ones hit it, as any warm server does).
std::string SampleText(int copies, bool distinct) {
  static constexpr const char* kParagraph =
      "The quick brown fox jumps over the lazy dog; it's 3.14159 past 12:00. "
      "def encode(self, text: str) -> list[int]:\n    return [ord(c) for c in text]\n\n"
      "Привет, мир! 你好，世界。 こんにちは 🌍 naïve café — “quoted” {\"k\": [1, 2]}\n";
  std::string text;
  for (int i = 0; i < copies; ++i) {
    text.append(kParagraph);
    if (distinct) {
      text.append("identifier_").append(std::to_string(i * 7919)).append("x ");
      text.append("Word").append(std::to_string(i)).append("zq\n");
    }
  }
  return text;
}

const Tokenizer& SharedTokenizer() {
  static const Tokenizer* tokenizer = [] {
    auto loaded = Tokenizer::FromJsonFile(TokenizerPath());
    if (!loaded.ok()) {
      std::fprintf(stderr, "error: %s\n", std::string(loaded.status().message()).c_str());
      std::exit(1);
    }
    // The first non-ASCII text builds the Unicode tables; keep that out of the timings.
    (void)(*loaded)->Encode(SampleText(1, false), false);
    return loaded->release();
  }();
  return *tokenizer;
}

void BM_Encode(benchmark::State& state, bool distinct) {
  const Tokenizer& tokenizer = SharedTokenizer();
  const std::string text = SampleText(static_cast<int>(state.range(0)), distinct);
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tokenizer.Encode(text, false);
    if (!ids.ok()) {
      state.SkipWithError("Encode failed");
      return;
    }
    tokens = ids->size();
    benchmark::DoNotOptimize(ids->data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}
BENCHMARK_CAPTURE(BM_Encode, repetitive, false)->Arg(1)->Arg(64);
BENCHMARK_CAPTURE(BM_Encode, distinct, true)->Arg(64);

// The router's case: one short prompt per request (9 tokens with BOS), so the per-call
// overhead is most of the cost.
void BM_EncodeShortPrompt(benchmark::State& state) {
  const Tokenizer& tokenizer = SharedTokenizer();
  const std::string text = "Hello world, this is a small prompt";
  for (auto _ : state) {
    auto ids = tokenizer.Encode(text, true);
    benchmark::DoNotOptimize(ids->data());
  }
}
BENCHMARK(BM_EncodeShortPrompt);

void BM_Decode(benchmark::State& state) {
  const Tokenizer& tokenizer = SharedTokenizer();
  const std::string text = SampleText(static_cast<int>(state.range(0)), false);
  auto ids = tokenizer.Encode(text, false);
  if (!ids.ok()) {
    state.SkipWithError("Encode failed");
    return;
  }
  for (auto _ : state) {
    std::string decoded = tokenizer.Decode(*ids, false);
    benchmark::DoNotOptimize(decoded.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_Decode)->Arg(64);

}  // namespace
}  // namespace switchyard::text

int main(int argc, char** argv) {
  // Take --tokenizer=PATH out before Google Benchmark parses the rest.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    constexpr const char* kFlag = "--tokenizer=";
    if (std::strncmp(argv[i], kFlag, std::strlen(kFlag)) == 0) {
      switchyard::text::TokenizerPath() = argv[i] + std::strlen(kFlag);
    } else {
      args.push_back(argv[i]);
    }
  }
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data()))
    return 1;
  switchyard::text::SharedTokenizer();  // load and warm up before timing starts
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
