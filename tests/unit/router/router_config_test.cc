#include "router/router_config.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

#include "router/scheduling/picker_config.h"

namespace switchyard::router {
namespace {

constexpr char kConfig[] = R"(
listen: {host: 127.0.0.1, port: 0, threads: 4}
model: tiny
tokenizer: models/tiny-llama3
pools:
- name: engines
  endpoints:
  - address: 127.0.0.1:8001
    engine: switchyard
    labels: {llm-d.ai/role: decode, hw: cpu}
    kvEvents: {endpoint: "tcp://127.0.0.1:5557", replayEndpoint: "tcp://127.0.0.1:5558"}
  - address: 127.0.0.1:8002
    engine: llamacpp
  dns:
  - {name: engines.svc, port: 8000, refreshSeconds: 5}
scraping: {intervalMs: 100}
proxy: {maxRetries: 1}
scheduling:
  plugins:
  - type: queue-scorer
)";

TEST(RouterConfigTest, ParsesEverySection) {
  auto c = ParseRouterConfig(kConfig, "router.yaml", ".");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->host, "127.0.0.1");
  EXPECT_EQ(c->threads, 4);
  EXPECT_EQ(c->model, "tiny");
  ASSERT_EQ(c->pools.size(), 1u);
  const PoolConfig& p = c->pools[0];
  ASSERT_EQ(p.endpoints.size(), 2u);
  EXPECT_EQ(p.endpoints[0].spec.name, "127.0.0.1:8001");
  EXPECT_EQ(p.endpoints[0].spec.labels.at("hw"), "cpu");
  EXPECT_EQ(p.endpoints[0].spec.pool, "engines");
  ASSERT_TRUE(p.endpoints[0].kv_events.has_value());
  EXPECT_EQ(p.endpoints[0].kv_events->replay_endpoint, "tcp://127.0.0.1:5558");
  EXPECT_EQ(p.endpoints[1].spec.engine, EngineKind::kLlamaCpp);
  ASSERT_EQ(p.dns.size(), 1u);
  EXPECT_EQ(p.dns[0].refresh_seconds, 5);
  EXPECT_EQ(c->scrape_interval_ms, 100);
  EXPECT_EQ(c->max_retries, 1);
  auto set = PluginSet::FromYaml(c->scheduling_yaml, "scheduling");
  ASSERT_TRUE(set.ok()) << set.status();
}

TEST(RouterConfigTest, ExtProcSection) {
  constexpr char kBase[] = "model: m\npools:\n- endpoints: [{address: 'h:1'}]\n";
  auto off = ParseRouterConfig(kBase, "r", ".");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->ext_proc_port, -1);
  EXPECT_EQ(off->grpc_health_port, -1);
  EXPECT_FALSE(off->ext_proc_fail_open);
  EXPECT_EQ(off->ext_proc_threads, 1);
  auto on = ParseRouterConfig(std::string(kBase) +
                                  "extProc: {port: 9002, healthPort: 9003, failureMode: open, "
                                  "threads: 4}\n",
                              "r", ".");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->ext_proc_port, 9002);
  EXPECT_EQ(on->grpc_health_port, 9003);
  EXPECT_TRUE(on->ext_proc_fail_open);
  EXPECT_EQ(on->ext_proc_threads, 4);
  EXPECT_FALSE(ParseRouterConfig(std::string(kBase) + "extProc: {threads: 0}\n", "r", ".").ok());
  EXPECT_FALSE(
      ParseRouterConfig(std::string(kBase) + "extProc: {failureMode: maybe}\n", "r", ".").ok());
  EXPECT_FALSE(ParseRouterConfig(std::string(kBase) + "extProc: {port: 70000}\n", "r", ".").ok());
}

TEST(RouterConfigTest, DefaultSchedulingAndFileReference) {
  auto c = ParseRouterConfig("model: m\npools:\n- endpoints: [{address: 'h:1'}]\n", "r", ".");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(PluginSet::FromYaml(c->scheduling_yaml, "default").ok());

  const auto dir = std::filesystem::temp_directory_path() / "sy_router_config_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "epp.yaml") << "plugins:\n- type: kv-cache-utilization-scorer\n";
  std::ofstream(dir / "router.yaml")
      << "model: m\npools:\n- endpoints: [{address: 'h:1'}]\nschedulingConfigFile: epp.yaml\n";
  auto f = LoadRouterConfig((dir / "router.yaml").string());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_NE(f->scheduling_yaml.find("kv-cache-utilization-scorer"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(RouterConfigTest, OutlierDetectionAndRequestTimeout) {
  constexpr char kBase[] = "model: m\npools:\n- endpoints: [{address: 'h:1'}]\n";
  auto defaults = ParseRouterConfig(kBase, "r", ".");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  // Envoy's defaults.
  EXPECT_EQ(defaults->outlier_detection.consecutive_5xx, 5);
  EXPECT_EQ(defaults->outlier_detection.base_ejection_time, std::chrono::seconds(30));
  EXPECT_EQ(defaults->outlier_detection.max_ejection_percent, 10);
  EXPECT_EQ(defaults->request_timeout_ms, 600'000);
  auto c = ParseRouterConfig(
      std::string(kBase) +
          "proxy: {requestTimeoutMs: 90000}\n"
          "outlierDetection: {consecutive5xx: 0, intervalMs: 500, baseEjectionTimeMs: 1000,\n"
          "                   maxEjectionTimeMs: 8000, maxEjectionPercent: 50}\n",
      "r", ".");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->request_timeout_ms, 90'000);
  EXPECT_EQ(c->outlier_detection.consecutive_5xx, 0);
  EXPECT_EQ(c->outlier_detection.interval, std::chrono::milliseconds(500));
  EXPECT_EQ(c->outlier_detection.base_ejection_time, std::chrono::milliseconds(1000));
  EXPECT_EQ(c->outlier_detection.max_ejection_time, std::chrono::milliseconds(8000));
  EXPECT_EQ(c->outlier_detection.max_ejection_percent, 50);
  for (const std::string bad :
       {"{maxEjectionPercent: 101}", "{baseEjectionTimeMs: 0}", "{consecutive5xx: -1}", "[1]"}) {
    auto e = ParseRouterConfig(std::string(kBase) + "outlierDetection: " + bad + "\n", "r", ".");
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(std::string(e.status().message()).find("outlierDetection"), std::string::npos)
        << e.status().message();
  }
}

TEST(RouterConfigTest, ErrorsNameTheKey) {
  auto expect_error = [](std::string yaml, std::string needle) {
    auto c = ParseRouterConfig(yaml, "r", ".");
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_NE(std::string(c.status().message()).find(needle), std::string::npos)
        << c.status().message();
  };
  expect_error("pools:\n- endpoints: [{address: 'h:1'}]\n", "model");
  expect_error("model: m\n", "pools must be a non-empty list");
  expect_error("model: m\npools:\n- endpoints: [{address: nohost}]\n", "pools[0].endpoints[0]");
  expect_error("model: m\npools:\n- endpoints: [{address: 'h:1', engine: tgi}]\n", "tgi");
  expect_error("model: m\npools:\n- name: x\n", "needs endpoints or dns");
  expect_error(
      "model: m\ntokenizer: /models/llama.Q4_K_M.gguf\npools:\n- endpoints: [{address: 'h:1'}]\n",
      "tokenizer: must be a Hugging Face directory with tokenizer.json; the router does "
      "not read .gguf files");
  expect_error("model: m\npools:\n- endpoints: [{address: 'h:1'}]\nscraping: {intervalMs: 0}\n",
               "intervalMs must be positive");
  expect_error("model: m\npools:\n- endpoints: [{address: 'h:1', labels: [a]}]\n", "labels");
  expect_error("model: m\nlisten: {port: 70000}\npools:\n- endpoints: [{address: 'h:1'}]\n",
               "port");
}

// Keys come from a variable or a file, the endpoint's overriding the pool's; DNS members get
// the pool's; errors name the source, never the key.
TEST(RouterConfigTest, CredentialsFromEnvironmentOrFile) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "sy_credentials";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "engine.key") << "sk-from-file\n";
  ASSERT_EQ(setenv("SY_TEST_POOL_KEY", "sk-from-env", 1), 0);
  absl::StatusOr<RouterConfig> c = ParseRouterConfig(R"(
model: m
pools:
- name: p
  credentials: {apiKeyEnv: SY_TEST_POOL_KEY}
  endpoints:
  - {address: 'h:1'}
  - {address: 'h:2', credentials: {apiKeyFile: engine.key}}
  dns:
  - {name: engines.svc}
- name: open
  endpoints:
  - {address: 'h:3'}
)",
                                                     "r", dir.string());
  ASSERT_TRUE(c.ok()) << c.status();
  const PoolConfig& p = c->pools[0];
  EXPECT_EQ(p.endpoints[0].spec.authorization, "Bearer sk-from-env");
  EXPECT_EQ(p.endpoints[0].spec.credentials, "env SY_TEST_POOL_KEY");
  EXPECT_EQ(p.endpoints[1].spec.authorization, "Bearer sk-from-file");
  EXPECT_EQ(p.endpoints[1].spec.credentials, "file " + (dir / "engine.key").string());
  EXPECT_EQ(p.dns[0].authorization, "Bearer sk-from-env");
  EXPECT_TRUE(c->pools[1].endpoints[0].spec.authorization.empty());

  auto expect_error = [&](std::string credentials, std::string needle) {
    absl::StatusOr<RouterConfig> bad = ParseRouterConfig(
        "model: m\npools:\n- credentials: " + credentials + "\n  endpoints: [{address: 'h:1'}]\n",
        "r", dir.string());
    ASSERT_FALSE(bad.ok()) << credentials;
    const std::string message(bad.status().message());
    EXPECT_NE(message.find(needle), std::string::npos) << message;
    EXPECT_EQ(message.find("sk-"), std::string::npos) << message;
  };
  expect_error("{apiKey: sk-inline}", "never inline");
  expect_error("{apiKeyEnv: SY_TEST_UNSET_KEY}", "SY_TEST_UNSET_KEY is not set");
  expect_error("{apiKeyFile: nothing.key}", "nothing.key");
  expect_error("{apiKeyEnv: SY_TEST_POOL_KEY, apiKeyFile: engine.key}", "one of");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace switchyard::router
