// SharedBody: the bytes of a request body, immutable once made and shared by every copy, so
// that copying a request (for a retry elsewhere, or for an upstream call that keeps the body
// until its response ends) costs a reference count, not the bytes: an LLM request body is
// often a long prompt. Made from a std::string, which is moved in without copying its bytes.
// An empty body holds nothing.
//
// Threads: copies may live on any threads (the bytes never change); one object is not to be
// assigned on one thread while read on another.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace switchyard::net {

class SharedBody {
 public:
  SharedBody() = default;
  // Implicit, so that `request.body = std::move(text)` and `request.body = "{}"` read as
  // they would for a string.
  SharedBody(std::string bytes)  // NOLINT(google-explicit-constructor)
      : bytes_(bytes.empty() ? nullptr : std::make_shared<const std::string>(std::move(bytes))) {}
  SharedBody(const char* bytes)  // NOLINT(google-explicit-constructor)
      : SharedBody(std::string(bytes)) {}

  std::string_view view() const { return bytes_ == nullptr ? std::string_view() : *bytes_; }
  operator std::string_view() const { return view(); }  // NOLINT(google-explicit-constructor)
  const char* data() const { return view().data(); }
  size_t size() const { return bytes_ == nullptr ? 0 : bytes_->size(); }
  bool empty() const { return size() == 0; }

  friend bool operator==(const SharedBody& a, std::string_view b) { return a.view() == b; }

 private:
  std::shared_ptr<const std::string> bytes_;
};

}  // namespace switchyard::net
