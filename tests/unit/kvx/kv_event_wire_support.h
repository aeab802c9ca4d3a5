// Test support for the KV-event stream (kv_event_publisher.h): its sequence frames, and a
// replay asked for as llm-d's subscriber does (a DEALER sending ["", start seq]), its answer
// collected. The frames are coded here by hand, not with kv_event_seq.h, so that the tests
// read the wire format independently of the code under test.
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include <zmq.hpp>

#include <zmq_addon.hpp>

namespace switchyard::kvx {

// `seq` as a sequence frame: 8 bytes, big-endian.
inline std::array<uint8_t, 8> SeqFrame(uint64_t seq) {
  std::array<uint8_t, 8> frame;
  for (size_t i = 0; i < frame.size(); ++i)
    frame[i] = static_cast<uint8_t>(seq >> (56 - 8 * i));
  return frame;
}

// The 8-byte big-endian number in `frame` (a failure if it is not 8 bytes).
inline uint64_t SeqFromFrame(const zmq::message_t& frame) {
  EXPECT_EQ(frame.size(), 8u);
  uint64_t value = 0;
  for (size_t i = 0; i < frame.size() && i < 8; ++i)
    value = value << 8 | frame.data<uint8_t>()[i];
  return value;
}

// Every (seq, payload) the replay socket sends from `start` on, up to its end marker. A
// timeout (the dealer's rcvtimeo) or a malformed answer is a failure; what came before it is
// returned.
inline std::vector<std::pair<uint64_t, std::string>> RequestReplay(zmq::socket_t& dealer,
                                                                   uint64_t start) {
  const std::array<uint8_t, 8> seq = SeqFrame(start);
  const zmq::const_buffer request[] = {zmq::const_buffer(), zmq::buffer(seq)};
  EXPECT_TRUE(zmq::send_multipart(dealer, request).has_value());
  std::vector<std::pair<uint64_t, std::string>> out;
  while (true) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(dealer, std::back_inserter(frames)).has_value()) {
      ADD_FAILURE() << "replay timed out";
      return out;
    }
    EXPECT_EQ(frames.size(), 3u);
    if (frames.size() != 3)
      return out;
    EXPECT_EQ(frames[0].size(), 0u);
    if (frames[1].to_string() == std::string(8, '\xff')) {
      EXPECT_EQ(frames[2].size(), 0u);
      return out;
    }
    out.emplace_back(SeqFromFrame(frames[1]), frames[2].to_string());
  }
}

}  // namespace switchyard::kvx
