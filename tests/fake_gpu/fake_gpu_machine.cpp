#include "fake_gpu_machine.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

namespace fake_gpu {
namespace {

// Kept where the compiler must assume it is read, as a driver keeps its state.
void* volatile resident = nullptr;

}  // namespace

int setting(const char* name, int otherwise) {
  const char* value = std::getenv((std::string("FAKE_GPU_") + name).c_str());
  return value != nullptr && *value != '\0' ? std::atoi(value) : otherwise;
}

int physicalCount() { return setting("COUNT", 0); }

std::string uuidOf(int index) {
  char uuid[64];
  std::snprintf(uuid, sizeof(uuid), "GPU-%x%07x-0c1e-4a5b-8d2f-%012x", index, 0x5eed00 + index,
                0xface00 + index);
  return uuid;
}

std::string nameOf(int index) {
  return index == setting("FAST", -1) ? "Fake GPU Fast" : "Fake GPU";
}

unsigned busOf(int index) { return 0x18u + 0x10u * static_cast<unsigned>(index); }

void startLikeADriver(const char* call) {
  if (const char* log = std::getenv("FAKE_GPU_CALL_LOG"); log != nullptr) {
    std::ofstream(log, std::ios::app) << getpid() << ' ' << call << '\n';
  }
  if (const char* crash = std::getenv("FAKE_GPU_CRASH"); crash && std::strcmp(crash, call) == 0) {
    raise(SIGSEGV);
  }
  if (const char* hang = std::getenv("FAKE_GPU_HANG"); hang && std::strcmp(hang, call) == 0) {
    for (;;) {
      pause();
    }
  }
  std::thread([] {
    for (;;) {
      pause();
    }
  }).detach();
  const std::size_t bytes = static_cast<std::size_t>(setting("RESIDENT_MIB", 32)) << 20;
  resident = std::malloc(bytes);
  if (resident != nullptr) {
    std::memset(resident, 0x5a, bytes);
  }
}

}  // namespace fake_gpu
