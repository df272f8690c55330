#include "ddprun/launcher/host/devices_command.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "ddprun/proto/cli_args.hpp"
#include "ddprun/proto/visible_gpus.hpp"

namespace ddprun::launcher {
namespace {

std::optional<std::string> cudaVisibleDevices() {
  const char* value = std::getenv("CUDA_VISIBLE_DEVICES");
  return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
}

void printTable(const proto::VisibleGpus& gpus, const std::optional<std::string>& visible) {
  const std::string selection =
      visible ? "CUDA_VISIBLE_DEVICES=" + *visible : "CUDA_VISIBLE_DEVICES unset";
  if (gpus.count == 0) {
    std::printf("no CUDA GPU is visible to workers (%s): %s\n", selection.c_str(),
                gpus.why_none.c_str());
    return;
  }
  std::printf("%d CUDA GPU%s visible to workers (counted by %s; %s)\n", gpus.count,
              gpus.count == 1 ? "" : "s", gpus.counted_by.c_str(), selection.c_str());
  for (int ordinal = 0; ordinal < gpus.count; ++ordinal) {
    const std::string& bus_id = gpus.bus_ids[static_cast<std::size_t>(ordinal)];
    std::printf("  cuda:%-3d %s\n", ordinal, bus_id.empty() ? "(no PCI bus id)" : bus_id.c_str());
  }
}

}  // namespace

int runDevicesCommand(const std::vector<std::string>& args) {
  CLI::App app(
      "Lists the CUDA GPUs this node's workers would see, counted as --nproc-per-node gpu\n"
      "counts them: NVML first, then the CUDA driver, under this CUDA_VISIBLE_DEVICES.",
      "ddprun devices");
  app.footer("Exit status: 0 it could ask (a GPU visible or not); 2 bad flags.");
  bool json = false;
  bool count_only = false;
  app.add_flag("--json", json, "Print the answer as one line of JSON, for scripts");
  app.add_flag("--count-only", count_only,
               "Never start the CUDA driver only to learn bus ids NVML cannot give in CUDA's "
               "order (two GPU models): they are then left out");
  try {
    // Flags only today; an option given later reads "--opt=" as argparse does.
    const std::vector<std::string> read = proto::readAsArgparse(app, args);
    std::vector<std::string> reversed(read.rbegin(), read.rend());  // CLI11 wants them reversed
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& error) {
    const std::string what = error.what();
    std::fprintf(stderr, "ddprun devices: %s\nusage: ddprun devices [--json] [--count-only]\n",
                 what.substr(0, what.find('\n')).c_str());
    return 2;
  }
  const std::optional<std::string> visible = cudaVisibleDevices();
  const proto::VisibleGpus gpus =
      proto::probeVisibleGpus(visible, proto::GpuLibraries::kNvmlThenDriver, !count_only);
  if (json) {
    std::printf("%s\n", proto::toJson(gpus).c_str());
  } else {
    printTable(gpus, visible);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace ddprun::launcher
