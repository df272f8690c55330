// The HTTP endpoint Prometheus scrapes: GET /metrics (the registry's text,
// Content-Type text/plain; version=0.0.4) and GET /healthz ("ok", or 503 with
// the reason MetricsEndpointOptions::unhealthy gives), HEAD of
// either, any other path 404 and any other method 405, over Boost.Beast, on
// a port of its own, never the store's.
//
// Owns its listening socket, its own io_context and the one thread that runs
// it: every connection, and every scrape (the registry's collectors run on
// that thread), so a slow scrape or a bad client never touches a store or an
// agent thread. A client is bounded: headers of 8 KiB, no request content
// ever read (a request announcing some is answered at once and closed), 10 s
// to send a request, at most 64 connections at once (more are closed at
// once), and a request it cannot parse (obsolete line folding included) is
// answered 400 and closed.
// Construct (binds), start(), then stop() (or destroy) from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ddprun/metrics/registry.hpp"

namespace ddprun::rdzv {

struct MetricsEndpointOptions {
  std::string host;        // empty: every address (IPv6 dual-stack, else IPv4)
  std::uint16_t port = 0;  // 0: an ephemeral port, see port()
  // Asked on the endpoint's thread at each /healthz: why the process is not
  // healthy, or "" when it is. Unset: always healthy.
  std::function<std::string()> unhealthy;
};

class MetricsEndpoint {
 public:
  // Binds and listens; throws NetworkError naming the address when it cannot,
  // ConfigError when `host` is not an IP address. `registry` is borrowed: it
  // outlives this endpoint and gets no new collectors once start() is called.
  MetricsEndpoint(MetricsEndpointOptions options, const metrics::Registry& registry);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  std::uint16_t port() const;
  std::string listenAddress() const;  // e.g. "[::]:9400"

  // Starts the thread; returns at once.
  void start();
  // Closes the socket and every connection, joins the thread. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddprun::rdzv
