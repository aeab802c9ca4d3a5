// A load client for Envoy's ext_proc (the Endpoint Picker Protocol) built from the same
// protocol definitions as the router, so that the client does not dominate what is measured:
// each request is one Process stream (request headers, then the body as one request_body
// message with end_of_stream), timed from the stream's start until the headers response and
// every re-sent body chunk (or an immediate response) have come back; then the stream is
// half-closed and finished, as Envoy ends one (--cancel: cancelled, as when the downstream
// client goes away). Bodies come one per line from --bodies, in
// turn. One shared channel (as a gateway keeps one); --concurrency threads each run their
// share of the requests back to back.
//
// Prints one line per request, "<latency_us> <what came back>", then "client_cpu_us <total>".
//   sy_ext_proc_client --target 127.0.0.1:9002 --bodies bodies.jsonl --requests 1000
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"

namespace {

namespace pb = envoy::service::ext_proc::v3;

pb::ProcessingRequest Headers(const std::string& path, size_t body_bytes) {
  pb::ProcessingRequest request;
  auto* headers = request.mutable_request_headers()->mutable_headers();
  const std::pair<const char*, std::string> pairs[] = {
      {":method", "POST"},
      {":path", path},
      {":authority", "gateway"},
      {":scheme", "http"},
      {"content-type", "application/json"},
      {"content-length", std::to_string(body_bytes)}};
  for (const auto& [key, value] : pairs) {
    auto* header = headers->add_headers();
    header->set_key(key);
    header->set_raw_value(value);
  }
  return request;
}

// One pick; returns what came back: "routed <endpoint>", "immediate <code>", or "error".
std::string Pick(pb::ExternalProcessor::Stub* stub, const std::string& path,
                 const std::string& body, bool cancel) {
  grpc::ClientContext context;
  auto stream = stub->Process(&context);
  pb::ProcessingRequest message;
  message.mutable_request_body()->set_body(body);
  message.mutable_request_body()->set_end_of_stream(true);
  std::string outcome = "error";
  if (stream->Write(Headers(path, body.size())) && stream->Write(message)) {
    pb::ProcessingResponse response;
    while (stream->Read(&response)) {
      if (response.has_immediate_response()) {
        outcome = "immediate " + std::to_string(response.immediate_response().status().code());
        break;
      }
      if (response.has_request_headers()) {
        for (const auto& option :
             response.request_headers().response().header_mutation().set_headers()) {
          if (option.header().key() == "x-gateway-destination-endpoint")
            outcome = "routed " + option.header().raw_value();
        }
      } else if (response.has_request_body()) {
        if (response.request_body().response().body_mutation().streamed_response().end_of_stream())
          break;
      }
    }
  }
  if (cancel)
    context.TryCancel();
  else
    stream->WritesDone();
  stream->Finish();
  return outcome;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ext_proc load client"};
  std::string target, bodies_path, path = "/v1/completions";
  int requests = 100, concurrency = 1;
  bool cancel = false;
  app.add_option("--target", target, "host:port of the ext_proc server")->required();
  app.add_option("--bodies", bodies_path, "request bodies, one per line")->required();
  app.add_option("--requests", requests, "how many picks in all");
  app.add_option("--concurrency", concurrency, "client threads");
  app.add_option("--path", path, "the request's :path");
  app.add_flag("--cancel", cancel, "cancel each stream after its pick instead of closing it");
  CLI11_PARSE(app, argc, argv);

  std::vector<std::string> bodies;
  std::ifstream in(bodies_path);
  for (std::string line; std::getline(in, line);)
    bodies.push_back(line);
  if (bodies.empty()) {
    std::fprintf(stderr, "no bodies in %s\n", bodies_path.c_str());
    return 2;
  }
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = pb::ExternalProcessor::NewStub(channel);
  std::vector<std::string> lines(requests);
  std::vector<std::thread> threads;
  for (int t = 0; t < concurrency; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < requests; i += concurrency) {
        const auto start = std::chrono::steady_clock::now();
        const std::string outcome = Pick(stub.get(), path, bodies[i % bodies.size()], cancel);
        const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now() - start)
                            .count();
        lines[i] = std::to_string(us) + " " + outcome;
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  for (const std::string& line : lines)
    std::printf("%s\n", line.c_str());
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const long cpu_us = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1'000'000L +
                      usage.ru_utime.tv_usec + usage.ru_stime.tv_usec;
  std::printf("client_cpu_us %ld\n", cpu_us);
  return 0;
}
