#include "ddprun/test_support/files.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

namespace ddprun::test_support {

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::map<std::string, std::string> readEnvFile(const std::filesystem::path& path) {
  std::map<std::string, std::string> env;
  std::istringstream lines(readFile(path));
  for (std::string line; std::getline(lines, line);) {
    const auto equals = line.find('=');
    if (equals != std::string::npos) {
      env[line.substr(0, equals)] = line.substr(equals + 1);
    }
  }
  return env;
}

namespace {

// One port bound on 127.0.0.1 by the kernel's choice, then released.
std::uint16_t boundThenReleasedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) {
      ::close(fd);
    }
    throw std::runtime_error("freeLoopbackPort: cannot bind 127.0.0.1:0");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace

// The kernel may hand a released port out again at once (an etcd cluster's
// two members were once given the same peer port), so the ports this
// process was given are remembered and never given twice.
std::uint16_t freeLoopbackPort() {
  static std::mutex mutex;
  static std::unordered_set<std::uint16_t> given;
  std::lock_guard lock(mutex);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::uint16_t port = boundThenReleasedPort();
    if (given.insert(port).second) {
      return port;
    }
  }
  throw std::runtime_error("freeLoopbackPort: the kernel gave only ports already given");
}

}  // namespace ddprun::test_support
