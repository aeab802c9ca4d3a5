#include "net/internal/client_loop.h"

#include <string>
#include <utility>
#include <vector>

#include "fmt/format.h"

#include "net/internal/client_call.h"

namespace switchyard::net::internal {

ClientLoop::ClientLoop(int index, const HttpClientOptions& options)
    : options_(options),
      loop_(fmt::format("sy-httpc-{}", index)),
      pool_(loop_.context(), options.max_idle_connections_per_upstream, options.pool_idle_timeout) {
}

ClientLoop::~ClientLoop() {
  Stop();
}

void ClientLoop::Add(std::shared_ptr<ClientCall> call) {
  ClientCall* key = call.get();
  calls_.emplace(key, std::move(call));
}

void ClientLoop::Remove(ClientCall* call) {
  calls_.erase(call);
}

void ClientLoop::Stop() {
  loop_.RunAndWait([this] {
    stopping_ = true;
    // Cancel removes from the map, so walk a copy.
    std::vector<std::shared_ptr<ClientCall>> calls;
    calls.reserve(calls_.size());
    for (const auto& [key, call] : calls_)
      calls.push_back(call);
    for (const auto& call : calls)
      call->Cancel("the client is stopping");
    pool_.Close();
  });
  loop_.Stop();
}

}  // namespace switchyard::net::internal
