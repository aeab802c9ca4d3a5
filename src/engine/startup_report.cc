#include "engine/startup_report.h"

#include <iterator>

#include "fmt/format.h"

#include "base/json.h"
#include "base/logging.h"
#include "kvx/kv_events.h"

namespace switchyard::engine {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double CompileSeconds(const RunnerStartup& s) {
  double total = 0;
  for (const compile::BucketBuild& b : s.compiled)
    total += b.seconds;
  return total;
}

}  // namespace

std::string StartupReportJson(const RunnerStartup& s, const RunnerLimits& limits,
                              const EngineSnapshot& snapshot) {
  std::string out = "{\"weights\":";
  auto it = std::back_inserter(out);
  if (s.weights.has_value()) {
    const model::WeightsLoad& w = *s.weights;
    out += "{\"source\":";
    base::AppendJsonString(w.source, false, &out);
    fmt::format_to(it,
                   ",\"bytes\":{},\"mapped_bytes\":{},\"copied_bytes\":{},\"converted_bytes\":{},"
                   "\"packed_bytes\":{},\"seconds\":{}}}",
                   w.mapped_bytes + w.copied_bytes + w.converted_bytes, w.mapped_bytes,
                   w.copied_bytes, w.converted_bytes, w.packed_bytes, w.seconds);
  } else {
    out += "null";
  }
  fmt::format_to(it, ",\"compiled\":{{\"mode\":\"{}\",\"seconds\":{},\"buckets\":[",
                 s.compiled.empty() ? "eager" : "compiled", CompileSeconds(s));
  for (size_t i = 0; i < s.compiled.size(); ++i) {
    const compile::BucketBuild& b = s.compiled[i];
    int64_t panels = 0;
    for (const compile::MatMulChoice& c : b.matmuls)
      panels += c.path == runtime::MatMulPath::kPanel ? 1 : 0;
    fmt::format_to(it,
                   "{}{{\"tokens\":{},\"logit_rows\":{},\"source\":\"{}\",\"seconds\":{},"
                   "\"digest\":\"{}\",\"tuned_matmul_shapes\":{},\"panel_shapes\":{},"
                   "\"fused_nodes\":{},\"kernels\":\"{}\"}}",
                   i == 0 ? "" : ",", b.shape.tokens, b.shape.logit_rows, b.source, b.seconds,
                   b.digest, b.matmuls.size(), panels, b.fused_nodes, b.kernels);
  }
  out += "]},\"kv_cache\":{\"dtype\":";
  base::AppendJsonString(s.kv_dtype, false, &out);
  fmt::format_to(it,
                 ",\"pool_bytes\":{},\"block_size\":{},\"tiers\":[{{\"medium\":\"{}\","
                 "\"capacity_blocks\":{}}}",
                 s.kv_pool_bytes, limits.block_size, kvx::kMediumGpu, limits.num_kv_blocks);
  for (const KvTierStats& t : snapshot.kv_tiers) {
    fmt::format_to(it, ",{{\"medium\":\"{}\",\"capacity_blocks\":{},\"block_bytes\":{}}}", t.medium,
                   t.capacity_blocks, t.block_bytes);
  }
  out += "]}}";
  return out;
}

void LogStartupReport(const RunnerStartup& s, const RunnerLimits& limits) {
  if (s.weights.has_value()) {
    const model::WeightsLoad& w = *s.weights;
    SY_LOG_INFO(
        "engine: weights: {}: {:.1f} MiB ({:.1f} mapped from the file, {:.1f} copied, "
        "{:.1f} converted; {:.1f} more packed for MatMul) in {:.2f} s",
        w.source, static_cast<double>(w.mapped_bytes + w.copied_bytes + w.converted_bytes) / kMiB,
        static_cast<double>(w.mapped_bytes) / kMiB, static_cast<double>(w.copied_bytes) / kMiB,
        static_cast<double>(w.converted_bytes) / kMiB, static_cast<double>(w.packed_bytes) / kMiB,
        w.seconds);
  }
  if (s.compiled.empty()) {
    SY_LOG_INFO("engine: compiled steps: none (every step eager)");
  } else {
    std::string buckets;
    for (const compile::BucketBuild& b : s.compiled) {
      fmt::format_to(std::back_inserter(buckets),
                     "{}{} tokens ({}, {:.1f} ms; {} fused, kernels {})",
                     buckets.empty() ? "" : ", ", b.shape.tokens, b.source, b.seconds * 1e3,
                     b.fused_nodes, b.kernels);
    }
    SY_LOG_INFO("engine: compiled steps: {} in {:.2f} s", buckets, CompileSeconds(s));
  }
  SY_LOG_INFO("engine: KV cache: {} blocks of {} tokens, {:.1f} MiB {}", limits.num_kv_blocks,
              limits.block_size, static_cast<double>(s.kv_pool_bytes) / kMiB,
              s.kv_dtype.empty() ? std::string("(no bytes)") : s.kv_dtype);
}

StartupNumbers StartupNumbersOf(const RunnerStartup& s) {
  StartupNumbers n;
  if (s.weights.has_value()) {
    n.weights_seconds = s.weights->seconds;
    n.weights_mapped_bytes = static_cast<int64_t>(s.weights->mapped_bytes);
    n.weights_copied_bytes = static_cast<int64_t>(s.weights->copied_bytes);
    n.weights_converted_bytes = static_cast<int64_t>(s.weights->converted_bytes);
    n.weights_packed_bytes = static_cast<int64_t>(s.weights->packed_bytes);
  }
  n.compile_seconds = CompileSeconds(s);
  for (const compile::BucketBuild& b : s.compiled)
    ++n.compiled_buckets[b.source];
  return n;
}

}  // namespace switchyard::engine
