// Arbitrary bytes as an OpenAI request body to every parser in api/. None may crash, and every
// failure must map to a 4xx/5xx error body that is itself valid JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "simdjson.h"

#include "api/chat_request.h"
#include "api/completion_request.h"
#include "api/error.h"
#include "api/response_writer.h"

namespace {

void CheckError(const absl::Status& status) {
  if (status.ok())
    return;
  const std::string body = switchyard::api::ErrorBody(status);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(body).get(root) != simdjson::SUCCESS)
    std::abort();
  if (switchyard::api::HttpErrorFor(status).http_status < 400)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace switchyard::api;
  std::string_view body(reinterpret_cast<const char*>(data), size);
  RequestLimits limits;
  limits.max_body_bytes = 1 << 16;
  CheckError(ParseCompletionRequest(body, limits).status());
  auto chat = ParseChatRequest(body, limits);
  CheckError(chat.status());
  if (chat.ok()) {
    // A parsed request must survive the writers on its own text.
    ChatChoice choice;
    choice.content = chat->messages.front().content;
    (void)ChatCompletionChunk({"chatcmpl-0", 0, chat->model}, choice, true);
    (void)ResolveMaxTokens(chat->sampling, 10, 4096, "messages");
  }
  CheckError(ParseTokenizeRequest(body, limits).status());
  CheckError(ParseDetokenizeRequest(body, limits).status());
  return 0;
}
