#include "net/route_table.h"

#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"

namespace switchyard::net {
namespace {

// Keeps what Send got; the table answers with Send only.
class RecordingResponder final : public HttpResponder {
 public:
  void Send(int sent_status, std::string_view sent_content_type, std::string sent_body,
            HeaderList extra_headers) override {
    status = sent_status;
    content_type = sent_content_type;
    body = std::move(sent_body);
    headers = std::move(extra_headers);
  }
  void StartStream(int, std::string_view, HeaderList) override { ADD_FAILURE(); }
  bool Write(std::string) override { return false; }
  void End() override {}
  void OnClose(std::function<void()>) override {}
  bool closed() const override { return false; }
  size_t pending_write_bytes() const override { return 0; }
  void OnDrained(size_t, std::function<void()>) override {}

  int status = 0;
  std::string content_type;
  std::string body;
  HeaderList headers;
};

std::pair<std::string, std::string> PlainError(int http_status, std::string_view message) {
  return {"text/plain", fmt::format("{} {}", http_status, message)};
}

class RouteTableTest : public ::testing::Test {
 protected:
  RouteTable::Handler Record(std::string name) {
    return [this, name](HttpRequest& request, std::shared_ptr<HttpResponder> responder) {
      ran_.push_back(name);
      request.body.clear();  // the handler may take the request apart
      responder->Send(200, "text/plain", name);
    };
  }

  // The answer to `method path` (with a body the handler takes).
  std::shared_ptr<RecordingResponder> Ask(const RouteTable& table, std::string method,
                                          std::string path) {
    HttpRequest request;
    request.method = std::move(method);
    request.path = std::move(path);
    request.body = "body";
    auto responder = std::make_shared<RecordingResponder>();
    table.Dispatch(request, responder);
    if (responder->status == 200) {
      EXPECT_EQ(request.body, "");
    }
    return responder;
  }

  std::vector<std::string> ran_;
};

TEST_F(RouteTableTest, RunsTheRouteOfTheMethodAndPath) {
  const RouteTable table({{"POST", "/v1/completions", Record("complete")},
                          {"GET", "/health", Record("health")},
                          {"POST", "/health", Record("health-post")}},
                         &PlainError);
  EXPECT_EQ(Ask(table, "POST", "/v1/completions")->body, "complete");
  EXPECT_EQ(Ask(table, "GET", "/health")->body, "health");
  EXPECT_EQ(Ask(table, "POST", "/health")->body, "health-post");
  EXPECT_EQ(ran_, (std::vector<std::string>{"complete", "health", "health-post"}));
}

TEST_F(RouteTableTest, KnownPathWithAnotherMethodIs405WithAllow) {
  const RouteTable table({{"GET", "/v1/models", Record("models")},
                          {"POST", "/admin", Record("admin-post")},
                          {"PUT", "/admin", Record("admin-put")}},
                         &PlainError);
  std::shared_ptr<RecordingResponder> r = Ask(table, "POST", "/v1/models");
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->content_type, "text/plain");
  EXPECT_EQ(r->body, "405 Method POST is not allowed on /v1/models; use GET.");
  EXPECT_EQ(r->headers, (HeaderList{{"allow", "GET"}}));
  // Every method of the path, in table order; HEAD is not implied by GET.
  r = Ask(table, "HEAD", "/admin");
  EXPECT_EQ(r->body, "405 Method HEAD is not allowed on /admin; use POST, PUT.");
  EXPECT_EQ(r->headers, (HeaderList{{"allow", "POST, PUT"}}));
  EXPECT_EQ(Ask(table, "HEAD", "/v1/models")->status, 405);
  EXPECT_TRUE(ran_.empty());
}

TEST_F(RouteTableTest, ALongMethodIsCutInTheMessage) {
  const RouteTable table({{"GET", "/health", Record("health")}}, &PlainError);
  std::shared_ptr<RecordingResponder> r = Ask(table, std::string(100, 'X'), "/health");
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->body, "405 Method " + std::string(16, 'X') + " is not allowed on /health; use GET.");
}

TEST_F(RouteTableTest, UnknownPathIs404) {
  const RouteTable table({{"GET", "/health", Record("health")}}, &PlainError);
  // Paths match exactly: no prefix, no trailing slash, no case folding.
  for (const char* path : {"/nope", "/health/", "/healthz", "/HEALTH", "", "/"}) {
    std::shared_ptr<RecordingResponder> r = Ask(table, "GET", path);
    EXPECT_EQ(r->status, 404) << path;
    EXPECT_EQ(r->body, "404 Not Found") << path;
    EXPECT_TRUE(r->headers.empty()) << path;
  }
  const RouteTable empty({}, &PlainError);
  EXPECT_EQ(Ask(empty, "GET", "/health")->status, 404);
  EXPECT_TRUE(ran_.empty());
}

}  // namespace
}  // namespace switchyard::net
