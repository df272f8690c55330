// The CUDA GPUs a worker will see, counted as PyTorch's
// torch.cuda.device_count() counts them: NVML first (no CUDA context is
// created), with CUDA_VISIBLE_DEVICES applied by the rules PyTorch applies
// to NVML's list; where NVML cannot answer (not installed, cannot start, a
// MIG list), the CUDA driver, which applies CUDA_VISIBLE_DEVICES itself.
// Neither library is linked: both are loaded with dlopen, so this runs on
// machines without a GPU. Pure apart from the libraries it loads; the caller
// chooses the process (ddprun counts in a short-lived child, since the
// driver leaves threads and memory behind in whoever asks it).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ddprun::proto {

struct VisibleGpus {
  int count = 0;
  // "NVML", "the CUDA driver", "CUDA_VISIBLE_DEVICES" when it alone decided
  // that none is visible, or "none" when no library that could count is
  // installed (why_none says which are missing).
  std::string counted_by;
  // When count is 0: why, naming what was tried and what each said.
  std::string why_none;
  // Each visible GPU's PCI bus id in CUDA ordinal order ("" where the
  // library gave none); empty when none is visible.
  std::vector<std::string> bus_ids;
};

// CUDA_VISIBLE_DEVICES as PyTorch reads it: unset (nullopt) means every
// device; otherwise ordinals or "GPU-"/"MIG-" UUID prefixes, where an entry
// that is not one ends the list and a repeated entry empties it. An ordinal
// too large for a long long is read as kHugeOrdinal (past any device).
inline constexpr long long kHugeOrdinal = 1'000'000'000'000'000'000LL;
using VisibleDeviceList = std::variant<std::vector<long long>, std::vector<std::string>>;
std::optional<VisibleDeviceList> parseVisibleDevices(const std::optional<std::string>& value);

// The CUDA ordinals -> physical indices a parsed list selects from `uuids`
// (each physical device's UUID, in NVML's index order): each entry must be
// the prefix of exactly one UUID; the first that is not ends the list, a
// repeated device empties it.
std::vector<int> ordinalsOfUuidPrefixes(const std::vector<std::string>& prefixes,
                                        const std::vector<std::string>& uuids);

// Which libraries a probe may load: both (NVML, then the driver where NVML
// cannot answer or cannot say which PCI device a CUDA ordinal is), or NVML
// alone (no CUDA state at all, for a process that must not start the driver).
enum class GpuLibraries { kNvmlThenDriver, kNvmlOnly };

// Counts in this process. `cuda_visible_devices` is the value the workers
// will get (nullopt: unset); the driver, where asked, reads this process's
// own CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, so pass that value.
// `exact_bus_ids` false: where NVML's order is not CUDA's (two models), the
// bus ids are left unknown ("") rather than asked of the driver, whose
// start can take seconds: for a caller that needs only the count.
VisibleGpus probeVisibleGpus(const std::optional<std::string>& cuda_visible_devices,
                             GpuLibraries libraries = GpuLibraries::kNvmlThenDriver,
                             bool exact_bus_ids = true);

// The probe's answer as one line of JSON, and back, for a parent that had a
// child count. fromJson throws ddprun::Error naming what is wrong.
std::string toJson(const VisibleGpus& gpus);
VisibleGpus visibleGpusFromJson(std::string_view text);

}  // namespace ddprun::proto
