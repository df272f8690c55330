// One HTTP GET, as a scraper or a browser sends it: how the tests read a
// metrics endpoint and ask a Prometheus server's API. Boost.Beast over one
// fresh connection; blocks the calling thread until the answer or the
// timeout. Stateless.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ddprun::test_support {

struct HttpAnswer {
  unsigned status = 0;       // 200, 404, ...
  std::string content_type;  // the Content-Type header, "" when none
  std::string body;
};

// GET `target` ("/metrics?x=1") from `host`:`port`. Throws std::runtime_error
// naming the address when it cannot connect, or no whole answer comes within
// `timeout`.
HttpAnswer httpGet(std::uint16_t port, const std::string& target,
                   std::chrono::milliseconds timeout = std::chrono::seconds(10),
                   const std::string& host = "127.0.0.1");

// `text` with every byte outside [A-Za-z0-9-_.~] as %XX: a query's value.
std::string urlEncode(const std::string& text);

}  // namespace ddprun::test_support
