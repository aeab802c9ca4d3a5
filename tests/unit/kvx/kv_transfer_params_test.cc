#include "kvx/kv_transfer_params.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kvx/kv_transfer_config.h"

namespace switchyard::kvx {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(KvTransferParamsTest, ReadsWhatVllmsProxySendsToEachSide) {
  auto to_prefill = ParseKvTransferParams(
      R"({"do_remote_decode": true, "do_remote_prefill": false, "remote_engine_id": null,
          "remote_block_ids": null, "remote_host": null, "remote_port": null})");
  ASSERT_TRUE(to_prefill.ok()) << to_prefill.status();
  EXPECT_TRUE(to_prefill->do_remote_decode);
  EXPECT_FALSE(to_prefill->do_remote_prefill);
  EXPECT_TRUE(to_prefill->remote_block_ids.empty());

  auto to_decode = ParseKvTransferParams(
      R"({"do_remote_prefill": true, "do_remote_decode": false, "remote_block_ids": [4, 5, 9],
          "remote_engine_id": "prefill-0", "remote_host": "10.0.0.7", "remote_port": 14579,
          "remote_request_id": "cmpl-1", "tp_size": 1, "some_future_field": {"x": 1}})");
  ASSERT_TRUE(to_decode.ok()) << to_decode.status();
  EXPECT_TRUE(to_decode->do_remote_prefill);
  EXPECT_THAT(to_decode->remote_block_ids, ElementsAre(4, 5, 9));
  EXPECT_EQ(to_decode->remote_engine_id, "prefill-0");
  EXPECT_EQ(to_decode->remote_host, "10.0.0.7");
  EXPECT_EQ(to_decode->remote_port, 14579);
  EXPECT_EQ(to_decode->remote_request_id, "cmpl-1");
}

TEST(KvTransferParamsTest, EncodedParamsReadBackEqual) {
  const KvTransferParams params{.do_remote_prefill = true,
                                .remote_block_ids = {0, 7, 3},
                                .remote_engine_id = "p\"0",
                                .remote_host = "127.0.0.1",
                                .remote_port = 4000,
                                .remote_request_id = "cmpl-\u00e9"};
  auto back = ParseKvTransferParams(EncodeKvTransferParams(params));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, params);
}

TEST(KvTransferParamsTest, WrongTypesAreNamed) {
  EXPECT_THAT(ParseKvTransferParams(R"({"do_remote_prefill": "yes"})").status().message(),
              HasSubstr("kv_transfer_params: do_remote_prefill: expected a boolean"));
  EXPECT_THAT(ParseKvTransferParams(R"({"remote_block_ids": [1, -2]})").status().message(),
              HasSubstr("remote_block_ids[1]: expected a non-negative block id"));
  EXPECT_THAT(ParseKvTransferParams(R"({"remote_port": 70000})").status().message(),
              HasSubstr("remote_port: expected a port"));
  EXPECT_FALSE(ParseKvTransferParams("[]").ok());
  EXPECT_FALSE(ParseKvTransferParams("{").ok());
}

TEST(KvTransferConfigTest, ReadsVllmsShape) {
  auto config = ParseKvTransferConfig(
      R"({"kv_connector": "SwitchyardConnector", "kv_role": "kv_producer", "engine_id": "p0",
          "kv_ip": "0.0.0.0", "kv_port": 14579, "kv_buffer_device": "cpu",
          "kv_connector_extra_config": {"lease_seconds": 30, "io_timeout_ms": 500,
                                        "load_threads": 2}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->role, KvRole::kProducer);
  EXPECT_TRUE(config->produces());
  EXPECT_FALSE(config->consumes());
  EXPECT_EQ(config->engine_id, "p0");
  EXPECT_EQ(config->kv_ip, "0.0.0.0");
  EXPECT_EQ(config->kv_port, 14579);
  EXPECT_EQ(config->lease_seconds, 30);
  EXPECT_EQ(config->io_timeout_ms, 500);
  EXPECT_EQ(config->load_threads, 2);

  auto both =
      ParseKvTransferConfig(R"({"kv_connector":"SwitchyardConnector","kv_role":"kv_both"})");
  ASSERT_TRUE(both.ok());
  EXPECT_TRUE(both->produces() && both->consumes());
  EXPECT_EQ(both->kv_ip, "127.0.0.1");
}

TEST(KvTransferConfigTest, RefusesWhatItCannotServe) {
  EXPECT_THAT(ParseKvTransferConfig(R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})")
                  .status()
                  .message(),
              HasSubstr("unknown connector \"NixlConnector\""));
  EXPECT_THAT(ParseKvTransferConfig(R"({"kv_connector":"SwitchyardConnector"})").status().message(),
              HasSubstr("kv_role: missing required field"));
  EXPECT_THAT(
      ParseKvTransferConfig(R"({"kv_connector":"SwitchyardConnector","kv_role":"kv_reader"})")
          .status()
          .message(),
      HasSubstr("expected \"kv_producer\""));
  EXPECT_THAT(ParseKvTransferConfig(
                  R"({"kv_connector":"SwitchyardConnector","kv_role":"kv_both","kv_port":-1})")
                  .status()
                  .message(),
              HasSubstr("kv_port: expected an integer in [0, 65535]"));
  EXPECT_THAT(ParseKvTransferConfig(
                  R"({"kv_connector":"SwitchyardConnector","kv_role":"kv_both","secret":"x"})")
                  .status()
                  .message(),
              HasSubstr("secret: unknown key"));
  EXPECT_THAT(ParseKvTransferConfig(R"({"kv_connector":"SwitchyardConnector","kv_role":"kv_both",
                                        "kv_connector_extra_config": {"load_threads": 0}})")
                  .status()
                  .message(),
              HasSubstr("load_threads: expected an integer in [1, 64]"));
}

}  // namespace
}  // namespace switchyard::kvx
