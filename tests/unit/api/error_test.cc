#include "api/error.h"

#include "gtest/gtest.h"

namespace switchyard::api {
namespace {

TEST(ErrorTest, InvalidParamIsA400WithParam) {
  const absl::Status status = InvalidParam("temperature", "temperature must be in [0, 2], got 3.");
  EXPECT_EQ(HttpErrorFor(status).http_status, 400);
  EXPECT_EQ(ErrorBody(status), R"({"error":{"message":"temperature must be in [0, 2], got 3.",)"
                               R"("type":"BadRequestError","param":"temperature","code":400}})");
}

TEST(ErrorTest, TableMapsCodes) {
  EXPECT_EQ(ErrorBody(ModelNotFound("x")),
            R"({"error":{"message":"The model `x` does not exist.","type":"NotFoundError",)"
            R"("param":null,"code":404}})");
  EXPECT_EQ(HttpErrorFor(absl::ResourceExhaustedError("queue")).http_status, 429);
  EXPECT_EQ(HttpErrorFor(PayloadTooLarge("big")).http_status, 413);
  EXPECT_EQ(HttpErrorFor(HeadersTooLarge("big")).http_status, 431);
  const HttpError conflict =
      HttpErrorFor(WithHttpStatus(absl::FailedPreconditionError("busy"), 409));
  EXPECT_EQ(conflict.http_status, 409);
  EXPECT_EQ(conflict.type, "ConflictError");
  EXPECT_EQ(HttpErrorFor(absl::FailedPreconditionError("x")).http_status, 400);
  EXPECT_EQ(HttpErrorFor(absl::UnimplementedError("x")).type, "NotImplementedError");
  EXPECT_EQ(HttpErrorFor(absl::UnavailableError("x")).http_status, 503);
  EXPECT_EQ(HttpErrorFor(absl::InternalError("x")).http_status, 500);
  EXPECT_EQ(HttpErrorFor(absl::DataLossError("x")).http_status, 500);
  // An override that the table does not list for the code falls back to the code's default.
  EXPECT_EQ(HttpErrorFor(WithHttpStatus(absl::InvalidArgumentError("x"), 418)).http_status, 400);
}

TEST(ErrorTest, TransportErrorsKeepTheirHttpStatus) {
  for (int http_status : {404, 405, 408, 413, 431, 400}) {
    const auto [content_type, body] = TransportErrorBody(http_status, "m");
    EXPECT_EQ(content_type, "application/json");
    EXPECT_EQ(body, ErrorBody(TransportError(http_status, "m")));
    EXPECT_EQ(HttpErrorFor(TransportError(http_status, "m")).http_status, http_status);
  }
  EXPECT_EQ(TransportErrorBody(405, "Method GET is not allowed on /x; use POST.").second,
            R"({"error":{"message":"Method GET is not allowed on /x; use POST.",)"
            R"("type":"MethodNotAllowedError","param":null,"code":405}})");
  // Statuses the HTTP layer does not decide are bad requests.
  EXPECT_EQ(HttpErrorFor(TransportError(418, "m")).http_status, 400);
}

TEST(ErrorTest, BodyIsValidUtf8AndBounded) {
  const std::string body = ErrorBody(ModelNotFound(std::string(10000, 'a') + "\xff"));
  EXPECT_LT(body.size(), 400u);
  EXPECT_EQ(ErrorBody(absl::InvalidArgumentError("bad \xff\"")),
            "{\"error\":{\"message\":\"bad \xEF\xBF\xBD\\\"\",\"type\":\"BadRequestError\","
            "\"param\":null,\"code\":400}}");
}

}  // namespace
}  // namespace switchyard::api
