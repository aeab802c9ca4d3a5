#include "router/extproc/body_chunks.h"

#include <algorithm>

namespace switchyard::router::extproc {

std::vector<std::string_view> BodyChunks(std::string_view body, size_t max_bytes) {
  std::vector<std::string_view> chunks;
  chunks.reserve(body.empty() ? 1 : (body.size() + max_bytes - 1) / max_bytes);
  size_t offset = 0;
  do {
    const size_t n = std::min(max_bytes, body.size() - offset);
    chunks.push_back(body.substr(offset, n));
    offset += n;
  } while (offset < body.size());
  return chunks;
}

}  // namespace switchyard::router::extproc
