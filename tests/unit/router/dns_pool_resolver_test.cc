#include "router/dns_pool_resolver.h"

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::router {
namespace {

using std::chrono::seconds;

std::vector<std::string> Names(const EndpointTable& table) {
  std::vector<std::string> out;
  for (const EndpointSpec& s : table.Members())
    out.push_back(s.name);
  return out;
}

const EndpointSpec* Find(const std::vector<EndpointSpec>& specs, const std::string& name) {
  for (const EndpointSpec& s : specs) {
    if (s.name == name)
      return &s;
  }
  return nullptr;
}

// Answers each host from a script, one answer per call, and counts the calls.
struct ScriptedDns {
  std::map<std::string, std::deque<absl::StatusOr<std::vector<std::string>>>> answers;
  std::map<std::string, int> calls;

  DnsResolveFn Fn() {
    return [this](const std::string& host) -> absl::StatusOr<std::vector<std::string>> {
      ++calls[host];
      auto& queue = answers[host];
      if (queue.empty())
        return absl::InternalError("unscripted lookup of " + host);
      absl::StatusOr<std::vector<std::string>> answer = queue.front();
      queue.pop_front();
      return answer;
    };
  }
};

PoolConfig DnsPool() {
  PoolConfig pool;
  pool.name = "p";
  StaticEndpointConfig fixed;
  fixed.spec.name = "static:1";
  fixed.spec.address = "static:1";
  fixed.spec.pool = "p";
  pool.endpoints.push_back(fixed);
  DnsMembersConfig svc;
  svc.name = "svc";
  svc.port = 8000;
  svc.refresh_seconds = 10;
  svc.engine = EngineKind::kSglang;
  svc.labels = {{"llm-d.ai/role", "decode"}};
  pool.dns.push_back(svc);
  DnsMembersConfig v6;
  v6.name = "v6";
  v6.port = 9000;
  v6.refresh_seconds = 30;
  pool.dns.push_back(v6);
  return pool;
}

TEST(DnsPoolResolverTest, ResolvesLocalhost) {
  absl::StatusOr<std::vector<std::string>> ips = ResolveHostAddresses("localhost");
  ASSERT_TRUE(ips.ok()) << ips.status();
  ASSERT_FALSE(ips->empty());
  for (const std::string& ip : *ips)
    EXPECT_TRUE(ip == "127.0.0.1" || ip == "::1") << ip;
  EXPECT_TRUE(std::is_sorted(ips->begin(), ips->end()));
  // A numeric address resolves to itself.
  absl::StatusOr<std::vector<std::string>> literal = ResolveHostAddresses("10.1.2.3");
  ASSERT_TRUE(literal.ok()) << literal.status();
  EXPECT_EQ(*literal, std::vector<std::string>{"10.1.2.3"});
}

TEST(DnsPoolResolverTest, RefreshesOnScheduleAndKeepsMembersThroughFailures) {
  EndpointTable table(std::chrono::milliseconds(2000));
  table.SetPoolMembers("p", {DnsPool().endpoints[0].spec});
  EndpointSpec other;
  other.name = "q:1";
  other.address = "q:1";
  table.SetPoolMembers("q", {other});  // a pool without dns entries: left alone

  ScriptedDns dns;
  dns.answers["svc"] = {std::vector<std::string>{"10.0.0.1", "10.0.0.2"},
                        absl::UnavailableError("resolver timed out"),
                        std::vector<std::string>{"10.0.0.1", "10.0.0.3"},
                        std::vector<std::string>{}};
  dns.answers["v6"] = {std::vector<std::string>{"fd00::1"}, std::vector<std::string>{"fd00::1"}};
  DnsPoolResolver resolver({DnsPool()}, &table, dns.Fn());
  const auto t0 = DnsPoolResolver::Clock::now();

  // First refresh: every entry, joined with the static member.
  EXPECT_EQ(resolver.RefreshDue(t0), t0 + seconds(10));
  EXPECT_EQ(Names(table), (std::vector<std::string>{"10.0.0.1:8000", "10.0.0.2:8000",
                                                    "[fd00::1]:9000", "q:1", "static:1"}));
  const std::vector<EndpointSpec> members = table.Members();
  const EndpointSpec* dns_member = Find(members, "10.0.0.1:8000");
  ASSERT_NE(dns_member, nullptr);
  EXPECT_EQ(dns_member->address, "10.0.0.1:8000");
  EXPECT_EQ(dns_member->pool, "p");
  EXPECT_EQ(dns_member->engine, EngineKind::kSglang);
  EXPECT_EQ(dns_member->labels.at("llm-d.ai/role"), "decode");

  // Not due yet: no lookup.
  EXPECT_EQ(resolver.RefreshDue(t0 + seconds(5)), t0 + seconds(10));
  EXPECT_EQ(dns.calls["svc"], 1);

  // A failed lookup keeps the members.
  EndpointMetrics m;
  m.waiting_requests = 7;
  table.ReportMetrics("10.0.0.1:8000", m, t0 + seconds(9));
  EXPECT_EQ(resolver.RefreshDue(t0 + seconds(10)), t0 + seconds(20));
  EXPECT_EQ(dns.calls["svc"], 2);
  EXPECT_EQ(Names(table).size(), 5u);

  // New answer: 10.0.0.2 leaves, 10.0.0.3 joins, 10.0.0.1 keeps its scraped state.
  EXPECT_EQ(resolver.RefreshDue(t0 + seconds(20)), t0 + seconds(30));
  EXPECT_EQ(Names(table), (std::vector<std::string>{"10.0.0.1:8000", "10.0.0.3:8000",
                                                    "[fd00::1]:9000", "q:1", "static:1"}));
  const std::vector<Endpoint> snapshot = *table.Snapshot(t0 + seconds(10));
  EXPECT_EQ(snapshot[0].name, "10.0.0.1:8000");
  EXPECT_EQ(snapshot[0].metrics.waiting_requests, 7);
  EXPECT_TRUE(snapshot[0].metrics.fresh);

  // An answer with no address empties that entry (only); both entries are due at 30 s.
  EXPECT_EQ(resolver.RefreshDue(t0 + seconds(30)), t0 + seconds(40));
  EXPECT_EQ(dns.calls["v6"], 2);
  EXPECT_EQ(Names(table), (std::vector<std::string>{"[fd00::1]:9000", "q:1", "static:1"}));
}

TEST(DnsPoolResolverTest, StartResolvesBeforeReturningAndStopJoins) {
  EndpointTable table(std::chrono::milliseconds(2000));
  PoolConfig pool;
  pool.name = "local";
  DnsMembersConfig entry;
  entry.name = "localhost";
  entry.port = 8123;
  entry.refresh_seconds = 3600;
  pool.dns.push_back(entry);
  DnsPoolResolver resolver({pool}, &table);
  resolver.Start();
  const std::vector<std::string> names = Names(table);
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names)
    EXPECT_TRUE(name == "127.0.0.1:8123" || name == "[::1]:8123") << name;
  // Stop wakes the thread from its hour-long wait.
  resolver.Stop();
  resolver.Stop();
}

}  // namespace
}  // namespace switchyard::router
