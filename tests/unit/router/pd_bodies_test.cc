#include "router/internal/pd_bodies.h"

#include "gtest/gtest.h"
#include "simdjson.h"

namespace switchyard::router::internal {
namespace {

TEST(PdBodiesTest, ThePrefillLegAsksForOneTokenWithoutAStream) {
  auto body = PrefillRequestBody(
      R"({"model": "m", "prompt": [1, 2], "stream": true, "stream_options": {"include_usage": true},)"
      R"( "max_tokens": 64, "kv_transfer_params": {"x": 1}, "temperature": 0 })");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, R"({"model":"m","prompt":[1, 2],"temperature":0,"kv_transfer_params":)"
                   R"({"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,)"
                   R"("remote_block_ids":null,"remote_host":null,"remote_port":null},)"
                   R"("stream":false,"max_tokens":1})");
  // max_completion_tokens is capped too when the client set it.
  auto chat = PrefillRequestBody(R"({"messages":[],"max_completion_tokens":9})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_NE(chat->find(R"("max_tokens":1,"max_completion_tokens":1})"), std::string::npos) << *chat;
  // Keys with escapes are written back escaped.
  auto escaped = PrefillRequestBody(R"({"a\"b":"c\n"})");
  ASSERT_TRUE(escaped.ok()) << escaped.status();
  EXPECT_TRUE(escaped->starts_with(R"({"a\"b":"c\n","kv_transfer_params")")) << *escaped;
  EXPECT_FALSE(PrefillRequestBody("[1]").ok());
  EXPECT_FALSE(PrefillRequestBody("{").ok());
}

TEST(PdBodiesTest, TheDecodeLegCarriesThePrefillsParams) {
  auto body = DecodeRequestBody(R"({"prompt":"hi","stream":true,"kv_transfer_params":null})",
                                R"({"do_remote_prefill": true, "remote_block_ids": [1, 2]})");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, R"({"prompt":"hi","stream":true,"kv_transfer_params":)"
                   R"({"do_remote_prefill": true, "remote_block_ids": [1, 2]}})");
  auto only = DecodeRequestBody("{}", "{}");
  ASSERT_TRUE(only.ok()) << only.status();
  EXPECT_EQ(*only, R"({"kv_transfer_params":{}})");
}

TEST(PdBodiesTest, KvTransferParamsOfAPrefillResponse) {
  auto params = KvTransferParamsOf(
      R"({"id": "x", "choices": [], "kv_transfer_params": {"remote_port": 5, "remote_block_ids": [3]}})");
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(*params, R"({"remote_port": 5, "remote_block_ids": [3]})");
  EXPECT_TRUE(absl::IsNotFound(KvTransferParamsOf(R"({"id": "x"})").status()));
  EXPECT_TRUE(absl::IsNotFound(KvTransferParamsOf(R"({"kv_transfer_params": null})").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(KvTransferParamsOf(R"({"kv_transfer_params": 3})").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(KvTransferParamsOf("not json").status()));
}

}  // namespace
}  // namespace switchyard::router::internal
