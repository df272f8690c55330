// Hosts LibTorch's own c10d::TCPStore server so store_bench can load it from a
// separate process, exactly as it loads ddprund.
//
//   libtorch_store_server [--host ADDR] [--port N; 0 = free port] [--port-file PATH]
//
// Prints "libtorch_store_server listening on <host>:<port>", writes the port to
// --port-file atomically (write, then rename) and runs until SIGTERM or SIGINT.
// Raises its soft fd limit to the hard one first, as ddprund does, so both
// servers can hold as many connections as the machine allows.
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <iostream>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "ddprun/test_support/fd_limit.hpp"
#include "server_options.hpp"

int main(int argc, char** argv) try {
  const ddprun::bench::ServerOptions options = ddprun::bench::parseServerOptions(argc, argv);
  ddprun::test_support::raiseFdLimit();  // as ddprund does

  // Block the stop signals before TCPStore starts its threads, so they inherit
  // the mask and sigwait below is the only receiver.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  c10d::TCPStoreOptions store_options;
  store_options.port = options.port;
  store_options.isServer = true;
  store_options.waitWorkers = false;  // no numWorkers: nobody to wait for
  store_options.timeout = std::chrono::seconds(60);
  c10d::TCPStore store(options.host, store_options);

  // 1.13's TCPStore reports the port it actually bound, so port 0 works.
  const std::uint16_t port = store.getPort();
  std::cout << "libtorch_store_server listening on " << options.host << ':' << port << std::endl;
  if (!options.port_file.empty()) {
    ddprun::bench::writePortFile(options.port_file, port);
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "libtorch_store_server: " << error.what() << '\n';
  return 1;
}
