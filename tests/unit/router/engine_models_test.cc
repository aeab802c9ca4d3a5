#include "router/engine_models.h"

#include <chrono>

#include "gtest/gtest.h"

namespace switchyard::router {
namespace {

TEST(EngineModelsTest, ParsesVllmsCardAndPicksTheServedModel) {
  absl::StatusOr<api::ModelCard> card =
      ParseModelCard(R"({"object":"list","data":[{"id":"other","created":1},)"
                     R"({"id":"tiny","object":"model","created":1733300000,"owned_by":"vllm",)"
                     R"("root":"/models/tiny","parent":null,"max_model_len":2048}]})",
                     "tiny");
  ASSERT_TRUE(card.ok()) << card.status();
  EXPECT_EQ(card->created, 1733300000);
  EXPECT_EQ(card->owned_by, "vllm");
  EXPECT_EQ(card->root, "/models/tiny");
  EXPECT_EQ(card->max_model_len, 2048);
  // llama-server names its model by its file: the first entry then.
  card =
      ParseModelCard(R"({"data":[{"id":"model.gguf","created":5,"owned_by":"llamacpp"}]})", "tiny");
  ASSERT_TRUE(card.ok());
  EXPECT_EQ(card->created, 5);
  EXPECT_FALSE(ParseModelCard("{}", "tiny").ok());
  EXPECT_FALSE(ParseModelCard(R"({"data":[]})", "tiny").ok());
  EXPECT_FALSE(ParseModelCard("not json", "tiny").ok());
}

TEST(EngineModelsTest, CardTakesEarliestCreatedAndSmallestWindow) {
  using std::chrono::seconds;
  EngineModels models;
  const auto t0 = EngineModels::Clock::now();
  EXPECT_TRUE(models.Due("a", t0));
  api::ModelCard a;
  a.created = 200;
  a.max_model_len = 4096;
  a.owned_by = "vllm";
  a.root = "/models/tiny";
  api::ModelCard b;
  b.created = 100;
  b.max_model_len = 2048;
  models.Report("a", a, t0);
  models.Report("b", b, t0);
  models.Report("c", std::nullopt, t0);  // asked, no answer
  EXPECT_FALSE(models.Due("a", t0 + seconds(1)));
  EXPECT_FALSE(models.Due("c", t0 + seconds(1)));
  EXPECT_TRUE(models.Due("a", t0 + EngineModels::kRefresh));
  api::ModelCard card = models.Card("tiny", {"a", "b", "c"});
  EXPECT_EQ(card.id, "tiny");
  EXPECT_EQ(card.created, 100);
  EXPECT_EQ(card.max_model_len, 2048);
  EXPECT_EQ(card.owned_by, "vllm");
  EXPECT_EQ(card.root, "/models/tiny");
  // Only the endpoints asked for (the healthy ones) count.
  EXPECT_EQ(models.Card("tiny", {"a"}).max_model_len, 4096);
  // A failed refresh keeps the last card.
  models.Report("a", std::nullopt, t0 + seconds(40));
  EXPECT_EQ(models.Card("tiny", {"a"}).created, 200);
  models.Retain({"b"});
  EXPECT_EQ(models.Card("tiny", {"a"}).created, 0);
}

}  // namespace
}  // namespace switchyard::router
