#include "endpoint_address.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/system/error_code.hpp>

namespace ddprun::launcher {
namespace {

bool isLoopbackAddress(const std::string& text) {
  boost::system::error_code error;
  const auto address = boost::asio::ip::make_address(text, error);
  return !error && address.is_loopback();
}

}  // namespace

bool namesLoopbackEverywhere(const std::string& host) {
  return host == "localhost" || isLoopbackAddress(host);
}

std::string rendezvousBindAddress(const std::string& host, const std::string& resolved) {
  if (isLoopbackAddress(resolved) && !namesLoopbackEverywhere(host)) {
    return "";
  }
  return resolved;
}

std::string advertisedStoreHost(const std::string& host, const std::string& local_address) {
  if (isLoopbackAddress(local_address) && !namesLoopbackEverywhere(host)) {
    return host;
  }
  return local_address;
}

}  // namespace ddprun::launcher
