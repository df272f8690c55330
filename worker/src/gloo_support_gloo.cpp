// gloo_support where LibTorch ships Gloo's headers (Debian's libtorch-dev
// with libgloo-dev; DDPRUN_TORCH_HAS_GLOO): the CPU's process group.
#include <cstdlib>
#include <sstream>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "ddprun/worker/c10d_compat.hpp"
#include "ddprun/worker/training_device.hpp"

namespace ddprun::worker::gloo_support {
namespace {

// GLOO_SOCKET_IFNAME (comma-separated) picks the interfaces, as in PyTorch;
// otherwise Gloo's default device (the hostname's address, else loopback).
std::vector<std::shared_ptr<gloo::transport::Device>> glooDevices() {
  std::vector<std::shared_ptr<gloo::transport::Device>> devices;
  if (const char* names = std::getenv("GLOO_SOCKET_IFNAME"); names != nullptr && *names) {
    std::stringstream list(names);
    std::string name;
    while (std::getline(list, name, ',')) {
      devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
    }
  } else {
    devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return devices;
}

}  // namespace

bool compiledIn() { return true; }

c10::intrusive_ptr<c10d::ProcessGroup> glooGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int world_size,
                                                 std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices = glooDevices();
  return c10d_compat::asProcessGroup(
      c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options), store, rank,
      world_size, c10::DeviceType::CPU, "gloo");
}

}  // namespace ddprun::worker::gloo_support
