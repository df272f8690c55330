// The one place that includes Boost.Asio. Boost 1.74's awaitable.hpp uses
// std::exchange without including <utility>, which GCC 12 rejects; including
// it first here fixes every user.
#pragma once

// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on

namespace ddprun::net {
namespace asio = boost::asio;
using tcp = boost::asio::ip::tcp;
using error_code = boost::system::error_code;
}  // namespace ddprun::net
