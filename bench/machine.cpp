#include "machine.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace ddprun::bench {

double machineBusySeconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
                     steal = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  const auto busy = user + nice + system + irq + softirq + steal;
  return static_cast<double>(busy) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double processCpuSeconds(bool include_children) {
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  double total = 0.0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    if (who == RUSAGE_CHILDREN && !include_children) {
      break;
    }
    rusage usage{};
    ::getrusage(who, &usage);
    total += seconds(usage.ru_utime) + seconds(usage.ru_stime);
  }
  return total;
}

std::string loadAverageText() {
  double load[3] = {0.0, 0.0, 0.0};
  if (::getloadavg(load, 3) != 3) {
    return "load average unknown";
  }
  char buffer[96];
  std::snprintf(buffer, sizeof(buffer), "load average: %.2f, %.2f, %.2f", load[0], load[1],
                load[2]);
  return buffer;
}

double memAvailableMiB() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0.0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") {
      return kib / 1024.0;
    }
  }
  return 0.0;
}

std::string machineText() {
  char memory[64];
  std::snprintf(memory, sizeof(memory), "MemAvailable %.1f GiB", memAvailableMiB() / 1024.0);
  return std::to_string(std::thread::hardware_concurrency()) + " CPUs, " + memory + ", " +
         loadAverageText();
}

std::filesystem::path selfDirectory() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path();
}

std::string builtPath(const char* built, const char* sibling) {
  return built != nullptr ? built : (selfDirectory() / sibling).string();
}

OtherCpu::OtherCpu()
    : wall_(std::chrono::steady_clock::now()),
      busy_(machineBusySeconds()),
      own_(processCpuSeconds(/*include_children=*/true)) {}

double OtherCpu::cores() const {
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count();
  const double other =
      (machineBusySeconds() - busy_) - (processCpuSeconds(/*include_children=*/true) - own_);
  return wall > 0 ? std::max(0.0, other / wall) : 0.0;
}

}  // namespace ddprun::bench
