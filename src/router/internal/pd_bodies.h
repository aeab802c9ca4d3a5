// The bodies of a disaggregated request's two legs (llm-d's P/D sidecar flow, vLLM's
// kv_transfer_params): the client's JSON body with some top-level fields replaced, every other
// field passed through as its raw JSON text (read with simdjson, never re-serialized), so the
// engines see the client's request as it was sent.
// Pure functions; any thread.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard::router::internal {

// The prefill leg: `kv_transfer_params` = {"do_remote_decode": true, "do_remote_prefill":
// false, remote_* null}, "stream": false, no "stream_options", "max_tokens": 1 (and
// "max_completion_tokens": 1 when the client set it). InvalidArgument for a body that is not
// a JSON object.
absl::StatusOr<std::string> PrefillRequestBody(std::string_view body);

// The decode leg: the client's request with `kv_transfer_params` (a JSON object's text, as
// the prefill endpoint answered it) in place of any the client sent.
absl::StatusOr<std::string> DecodeRequestBody(std::string_view body,
                                              std::string_view kv_transfer_params);

// The text of the `kv_transfer_params` object in a prefill endpoint's JSON response.
// NotFound when it has none (or null); InvalidArgument when the response is not a JSON object
// or the field is not an object.
absl::StatusOr<std::string> KvTransferParamsOf(std::string_view response);

}  // namespace switchyard::router::internal
