#include "router/scheduling/session_affinity.h"

#include <array>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace switchyard::router {
namespace {

constexpr size_t kTagBytes = 16;
constexpr size_t kMaxTokenBytes = 1024;

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string Base64Url(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = acc << 8 | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 63]);
    }
  }
  if (bits > 0)
    out.push_back(kAlphabet[(acc << (6 - bits)) & 63]);
  return out;
}

std::optional<std::string> FromBase64Url(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = -1;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '-')
      v = 62;
    else if (c == '_')
      v = 63;
    if (v < 0)
      return std::nullopt;
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

}  // namespace

std::string SessionTokenCodec::Tag(std::string_view endpoint) const {
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(endpoint.data()), endpoint.size(), mac.data(), &len);
  return std::string(reinterpret_cast<const char*>(mac.data()), kTagBytes);
}

std::string SessionTokenCodec::Cached(std::string_view endpoint, bool remember,
                                      std::string Signed::*field) const {
  {
    base::MutexLock lock(&mu_);
    // Debian's absl::string_view is not std::string_view: the heterogeneous lookup needs it.
    if (const auto it = signed_.find(absl::string_view(endpoint.data(), endpoint.size()));
        it != signed_.end())
      return it->second.*field;
  }
  Signed s;
  s.tag = Tag(endpoint);
  s.token = Base64Url(endpoint) + "." + Base64Url(s.tag);
  if (remember) {
    base::MutexLock lock(&mu_);
    if (signed_.size() >= kMaxCachedTags)
      signed_.clear();
    signed_.try_emplace(std::string(endpoint), s);
  }
  return s.*field;
}

std::string SessionTokenCodec::Issue(std::string_view endpoint) const {
  return Cached(endpoint, true, &Signed::token);
}

std::optional<std::string> SessionTokenCodec::Verify(std::string_view token) const {
  if (token.size() > kMaxTokenBytes)
    return std::nullopt;
  const size_t dot = token.find('.');
  if (dot == std::string_view::npos)
    return std::nullopt;
  std::optional<std::string> endpoint = FromBase64Url(token.substr(0, dot));
  std::optional<std::string> tag = FromBase64Url(token.substr(dot + 1));
  if (!endpoint.has_value() || !tag.has_value() || tag->size() != kTagBytes)
    return std::nullopt;
  const std::string want = Cached(*endpoint, false, &Signed::tag);
  if (CRYPTO_memcmp(want.data(), tag->data(), kTagBytes) != 0)
    return std::nullopt;
  return endpoint;
}

std::optional<std::string> SessionAffinity::SessionEndpoint(const SchedulingRequest& request) {
  if (strategy_ == Strategy::kToken) {
    if (request.session_token.empty() || codec_ == nullptr)
      return std::nullopt;
    return codec_->Verify(request.session_token);
  }
  if (request.session_id.empty())
    return std::nullopt;
  base::MutexLock lock(&mu_);
  auto it = sessions_.find(request.session_id);
  if (it == sessions_.end() || Clock::now() - it->second.last_used > ttl_)
    return std::nullopt;
  return it->second.endpoint;
}

Candidates SessionAffinity::Apply(const SchedulingRequest& request, CycleState&,
                                  const Candidates& candidates) {
  const std::optional<std::string> target = SessionEndpoint(request);
  if (!target.has_value())
    return candidates;
  for (const Endpoint* e : candidates) {
    if (e->name == *target)
      return {e};
  }
  return candidates;
}

void SessionAffinity::Score(const SchedulingRequest& request, CycleState&,
                            const Candidates& candidates, std::span<double> scores) {
  const std::optional<std::string> target = SessionEndpoint(request);
  for (size_t i = 0; i < candidates.size(); ++i)
    scores[i] = target.has_value() && candidates[i]->name == *target ? 1.0 : 0.0;
}

void SessionAffinity::OnPicked(const SchedulingRequest& request, CycleState&,
                               const Endpoint& picked) {
  if (strategy_ != Strategy::kSessionId || request.session_id.empty())
    return;
  Remember(request.session_id, picked.name);
  if (SchedulingObserver* observer = observers_ == nullptr ? nullptr : observers_->get())
    observer->SessionBound(request.session_id, picked.name);
}

void SessionAffinity::Bind(std::string_view session_id, const std::string& endpoint) {
  if (strategy_ == Strategy::kSessionId && !session_id.empty())
    Remember(session_id, endpoint);
}

void SessionAffinity::Remember(std::string_view session_id, const std::string& endpoint) {
  const Clock::time_point now = Clock::now();
  base::MutexLock lock(&mu_);
  sessions_[std::string(session_id)] = {endpoint, now};
  if (now >= next_sweep_) {
    // Amortized expiry: a full pass at most every ttl/4.
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (now - it->second.last_used > ttl_)
        sessions_.erase(it++);
      else
        ++it;
    }
    next_sweep_ = now + ttl_ / 4;
  }
}

}  // namespace switchyard::router
