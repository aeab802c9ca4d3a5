// The one place net/ includes Boost.Asio and Boost.Beast (buffers, status reasons and the
// HTTP error codes; HTTP/1.1 parsing is our own, http1_parser.h). Only net/'s .cc files and its
// internal/ headers include this; nothing outside net/ sees Boost.
//
// <utility> comes first: Boost 1.74's Asio does not compile as C++20 without it.
#pragma once

// clang-format off
#include <utility>

#include <chrono>

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

// Sockets, timers and resolvers bound to the io_context's own executor type rather than
// asio's default any_io_executor: every async operation then completes through the concrete
// executor instead of a type-erased one (a few hundred instructions per request).
using Executor = asio::io_context::executor_type;
using Socket = asio::basic_stream_socket<tcp, Executor>;
using Acceptor = asio::basic_socket_acceptor<tcp, Executor>;
using Resolver = asio::ip::basic_resolver<tcp, Executor>;
using SteadyTimer =
    asio::basic_waitable_timer<std::chrono::steady_clock,
                               asio::wait_traits<std::chrono::steady_clock>, Executor>;

}  // namespace switchyard::net::internal
