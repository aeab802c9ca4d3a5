#include "router/kube_pool_resolver.h"

#include "gtest/gtest.h"

#include "router/router_config.h"

namespace switchyard::router {
namespace {

TEST(KubePoolConfigTest, ParsesTheInferencePoolForm) {
  auto c = ParseRouterConfig(R"(model: m
pools:
- name: gw
  inferencePool: {namespace: llm, name: my-pool}
  kubeconfig: kube/config
  engine: switchyard
- name: incluster
  inferencePool: {name: other}
)",
                             "router.yaml", "/etc/sy");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->pools[0].inference_pool.has_value());
  const InferencePoolRefConfig& ref = *c->pools[0].inference_pool;
  EXPECT_EQ(ref.namespace_name, "llm");
  EXPECT_EQ(ref.name, "my-pool");
  EXPECT_EQ(ref.kubeconfig, "/etc/sy/kube/config");
  EXPECT_EQ(ref.engine, EngineKind::kVllm);  // switchyard speaks vLLM's metrics
  ASSERT_TRUE(c->pools[1].inference_pool.has_value());
  EXPECT_TRUE(c->pools[1].inference_pool->namespace_name.empty());
  EXPECT_TRUE(c->pools[1].inference_pool->kubeconfig.empty());
  EXPECT_EQ(c->pools[1].inference_pool->engine, EngineKind::kVllm);

  for (auto [yaml, needle] : std::vector<std::pair<std::string, std::string>>{
           {"model: m\npools:\n- inferencePool: {namespace: x}\n",
            "inferencePool: name is required"},
           {"model: m\npools:\n- inferencePool: [a]\n", "must be a map"},
           {"model: m\npools:\n- inferencePool: {name: p}\n  engine: tgi\n", "tgi"},
           {"model: m\npools:\n- endpoints: [{address: 'h:1'}]\n  kubeconfig: k\n",
            "kubeconfig is for an inferencePool pool"}}) {
    auto bad = ParseRouterConfig(yaml, "r", ".");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_NE(std::string(bad.status().message()).find(needle), std::string::npos)
        << bad.status().message();
  }
}

TEST(KubePoolMembersTest, ReadyPodsOnEveryPortWithTheirLabels) {
  PoolConfig pool;
  pool.name = "gw";
  pool.authorization = "Bearer k";
  pool.credentials = "env K";
  pool.inference_pool = InferencePoolRefConfig{"llm", "p", "", EngineKind::kSglang};
  StaticEndpointConfig fixed;
  fixed.spec.name = fixed.spec.address = "10.0.0.9:8000";
  fixed.spec.labels = {{"static", "yes"}};
  pool.endpoints.push_back(fixed);

  std::vector<kube::Pod> pods = {
      {"b", "10.0.0.2", {{"llm-d.ai/role", "decode"}}, true},
      {"a", "10.0.0.1", {{"llm-d.ai/role", "prefill"}}, true},
      {"c", "10.0.0.3", {}, false},
      {"v6", "fd00::5", {}, true},
      // Same address as the static member: the static spec wins.
      {"dup", "10.0.0.9", {{"static", "no"}}, true},
  };
  std::vector<EndpointSpec> members = KubePoolMembers(pool, pods, {8000, 9000});
  std::vector<std::string> names;
  for (const EndpointSpec& m : members)
    names.push_back(m.name);
  EXPECT_EQ(names, (std::vector<std::string>{"10.0.0.9:8000", "10.0.0.1:8000", "10.0.0.1:9000",
                                             "10.0.0.2:8000", "10.0.0.2:9000", "10.0.0.9:9000",
                                             "[fd00::5]:8000", "[fd00::5]:9000"}));
  EXPECT_EQ(members[0].labels.at("static"), "yes");
  EXPECT_EQ(members[1].labels.at("llm-d.ai/role"), "prefill");
  EXPECT_EQ(members[1].address, "10.0.0.1:8000");
  EXPECT_EQ(members[1].engine, EngineKind::kSglang);
  EXPECT_EQ(members[1].pool, "gw");
  EXPECT_EQ(members[1].authorization, "Bearer k");
  EXPECT_EQ(members[1].credentials, "env K");
  EXPECT_EQ(members[5].labels.at("static"), "no");

  EXPECT_EQ(KubePoolMembers(pool, pods, {}).size(), 1u);
}

}  // namespace
}  // namespace switchyard::router
