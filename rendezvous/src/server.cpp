// Exceptions: the constructor throws NetworkError when it cannot listen.
// After start(), nothing throws out of a handler: accept errors are logged
// and retried, session errors close that session only.
#include "ddprun/rendezvous/server.hpp"

#include <atomic>
#include <future>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "ddprun/net/asio.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/store_state.hpp"
#include "listen_socket.hpp"
#include "log.hpp"
#include "rendezvous_timer.hpp"
#include "session.hpp"
#include "session_registry.hpp"

namespace ddprun::rdzv {
namespace {

// PyTorch's libuv server uses the kernel's maximum backlog so that a start-up
// storm of thousands of ranks is not reset (pytorch#128739); so do we. The
// kernel truncates a larger backlog to net.core.somaxconn, as libuv's -1
// asks; reading that file on every agent's start cost more than the listen.
constexpr int kKernelMaximumBacklog = std::numeric_limits<int>::max();

}  // namespace

struct Server::Impl {
  explicit Impl(ServerOptions opts)
      : options(std::move(opts)),
        state(registry, options.max_memory_bytes, options.limits.max_request_bytes),
        context{store_mutex,
                state,
                registry,
                rendezvous,
                [this] {
                  if (rendezvous_timer) {
                    rendezvous_timer->changed();
                  }
                },
                options.limits,
                options.legacy_dialect,
                options.request_timeout} {
    const int count = std::max(1, options.threads);
    for (int i = 0; i < count; ++i) {
      contexts.push_back(std::make_unique<net::asio::io_context>(1));
    }
    loads = std::vector<ThreadLoad>(static_cast<std::size_t>(count));
    rendezvous_timer.emplace(*contexts.front(), store_mutex, rendezvous, state.keySpace(""));
    acceptor.emplace(*contexts.front());
    accept_backoff.emplace(*contexts.front(), "ddprund");
    listen();
  }

  void listen();
  std::size_t leastLoadedThread() const;
  void startAccept();
  void onAccept(const net::error_code& error, net::tcp::socket socket);

  ServerOptions options;
  std::mutex store_mutex;
  SessionRegistry registry;
  StoreState state;
  RendezvousService rendezvous{{options.rendezvous_host_agent, options.token,
                                options.idle_run_timeout, options.run_retention, options.event_acks,
                                options.rendezvous_run_id}};  // store_mutex
  SessionContext context;
  std::vector<std::unique_ptr<net::asio::io_context>> contexts;
  std::optional<RendezvousTimer> rendezvous_timer;  // on contexts.front()
  std::optional<net::asio::ip::tcp::acceptor> acceptor;
  std::optional<AcceptBackoff> accept_backoff;  // on contexts.front()
  std::vector<std::thread> threads;
  std::vector<net::asio::executor_work_guard<net::asio::io_context::executor_type>> guards;
  std::atomic<ClientId> next_client{1};
  std::vector<ThreadLoad> loads;  // one per context
  std::size_t accepting_for = 0;  // the context the pending accept is for
  bool started = false;
  bool stopped = false;
};

void Server::Impl::listen() {
  listenOn(*acceptor, options.host, options.port, kKernelMaximumBacklog, "--host");
}

// Round-robin would put every 1.13 client's busy main connection on one
// thread and its idle callback connection on the next, so connections go to
// the thread with the fewest that have sent a request, then the fewest overall.
std::size_t Server::Impl::leastLoadedThread() const {
  std::size_t best = 0;
  for (std::size_t i = 1; i < loads.size(); ++i) {
    const int active = loads[i].active.load(), best_active = loads[best].active.load();
    if (active < best_active ||
        (active == best_active && loads[i].connections.load() < loads[best].connections.load())) {
      best = i;
    }
  }
  return best;
}

void Server::Impl::startAccept() {
  accepting_for = leastLoadedThread();
  auto& target = *contexts[accepting_for];
  acceptor->async_accept(target.get_executor(),
                         [this](const net::error_code& error, net::tcp::socket socket) {
                           onAccept(error, std::move(socket));
                         });
}

void Server::Impl::onAccept(const net::error_code& error, net::tcp::socket socket) {
  if (error == net::asio::error::operation_aborted || !acceptor->is_open()) {
    return;
  }
  if (error) {
    accept_backoff->failed(error, [this] { startAccept(); });
    return;
  }
  accept_backoff->accepted();
  net::error_code ignored;
  socket.set_option(net::tcp::no_delay(true), ignored);
  socket.set_option(net::asio::socket_base::keep_alive(true), ignored);
  const auto remote = socket.remote_endpoint(ignored);
  // The session belongs to the io_context its socket was accepted onto.
  auto executor = socket.get_executor();
  ThreadLoad& load = loads[accepting_for];
  ++load.connections;
  auto session = std::make_shared<Session>(std::move(socket), next_client++, formatEndpoint(remote),
                                           context, load);
  net::asio::post(executor, [session] { session->start(); });
  startAccept();
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() { stop(); }

std::uint16_t Server::port() const { return impl_->acceptor->local_endpoint().port(); }

std::string Server::listenAddress() const {
  return formatEndpoint(impl_->acceptor->local_endpoint());
}

void Server::start() {
  if (impl_->started) {
    return;
  }
  impl_->started = true;
  net::asio::post(*impl_->contexts.front(), [impl = impl_.get()] { impl->startAccept(); });
  for (auto& context : impl_->contexts) {
    impl_->guards.push_back(net::asio::make_work_guard(*context));
    impl_->threads.emplace_back([&context] { context->run(); });
  }
}

void Server::stop() {
  if (!impl_ || impl_->stopped) {
    return;
  }
  impl_->stopped = true;
  if (!impl_->started) {
    return;
  }
  // 1. Close the acceptor on its own thread, after any accept in progress;
  // 2. then, behind the start of every session accepted before that (each
  // posted to its thread already), pass a barrier on every thread. One wait
  // here for both: each is a wake-up of a sleeping thread on the agent's
  // way out.
  std::promise<void> passed;
  std::atomic<std::size_t> threads_left{impl_->contexts.size()};
  net::asio::post(*impl_->contexts.front(), [impl = impl_.get(), &passed, &threads_left] {
    net::error_code ignored;
    impl->acceptor->close(ignored);
    impl->accept_backoff->cancel();
    impl->rendezvous_timer->stop();
    for (auto& context : impl->contexts) {
      net::asio::post(*context, [&passed, &threads_left] {
        if (--threads_left == 0) {
          passed.set_value();
        }
      });
    }
  });
  passed.get_future().wait();
  // 3. Close every session; each thread's run() returns once its handlers end.
  std::vector<SessionPtr> sessions;
  {
    std::lock_guard lock(impl_->store_mutex);
    sessions = impl_->registry.snapshot();
  }
  for (auto& session : sessions) {
    session->shutdown();
  }
  sessions.clear();
  impl_->guards.clear();
  for (auto& thread : impl_->threads) {
    thread.join();
  }
}

void Server::clearKeySpace(std::string_view name) {
  std::lock_guard lock(impl_->store_mutex);
  impl_->state.keySpace(name).clearData();
}

std::size_t Server::agentsConnected(std::string_view run_id, std::string_view besides) const {
  std::lock_guard lock(impl_->store_mutex);
  return impl_->rendezvous.agentsConnected(run_id, besides);
}

void Server::collectMetrics(metrics::Exposition& out) const {
  std::vector<const ThreadMetrics*> threads;
  for (const ThreadLoad& load : impl_->loads) {
    threads.push_back(&load.metrics);
  }
  collectSessionMetrics(threads, out);
  std::lock_guard lock(impl_->store_mutex);
  collectStoreMetrics(impl_->state, out);
  impl_->rendezvous.collectMetrics(out);
}

ServerStats Server::stats() const {
  std::lock_guard lock(impl_->store_mutex);
  KeySpace& space = impl_->state.keySpace("");
  std::vector<int> active;
  for (const ThreadLoad& load : impl_->loads) {
    active.push_back(load.active.load());
  }
  return {impl_->registry.size(), space.numKeys(), space.waitingClients(), std::move(active)};
}

}  // namespace ddprun::rdzv
