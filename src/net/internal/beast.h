// The one place net/ includes Boost.Asio and Boost.Beast (buffers, status reasons and the
// HTTP error codes; HTTP/1.1 parsing is our own, http1_parser.h). Only net/'s .cc files and its
// internal/ headers include this; nothing outside net/ sees Boost.
//
// <utility> comes first: Boost 1.74's Asio does not compile as C++20 without it.
#pragma once

// clang-format off
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>
// clang-format on

namespace switchyard::net::internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using ErrorCode = boost::system::error_code;

}  // namespace switchyard::net::internal
