#include "ddprun/proto/visible_gpus.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/json_parse.hpp"
#include "gpu_libraries.hpp"

namespace ddprun::proto {
namespace {

std::vector<std::string> splitOnCommas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) {
    parts.push_back(part);
  }
  if (text.empty() || text.back() == ',') {
    parts.emplace_back();  // getline drops a last empty field
  }
  return parts;
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\n\r\f\v");
  if (first == std::string::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(" \t\n\r\f\v") - first + 1);
}

// The number an entry starts with, as the driver's strtoul reads it ("1gpu"
// is 1, "007" is 7); -1 for none or a negative one; kHugeOrdinal for one
// of more than 18 digits (past any device, and never a long long overflow).
long long leadingOrdinal(const std::string& entry) {
  const bool sign = !entry.empty() && (entry[0] == '+' || entry[0] == '-');
  std::size_t end = sign ? 1 : 0;
  while (end < entry.size() && std::isdigit(static_cast<unsigned char>(entry[end]))) {
    ++end;
  }
  const std::size_t digits_start = sign ? 1 : 0;
  if (end == digits_start) {
    return -1;
  }
  if (entry[0] == '-') {
    return entry.find_first_not_of('0', 1) < end ? -1 : 0;  // "-0" is 0
  }
  const std::size_t significant = std::min(entry.find_first_not_of('0', digits_start), end);
  if (end - significant > 18) {
    return kHugeOrdinal;
  }
  return significant == end ? 0 : std::stoll(entry.substr(significant, end - significant));
}

std::vector<std::string> uuidPrefixes(const std::string& value, const std::string& prefix) {
  std::vector<std::string> entries;
  for (const std::string& entry : splitOnCommas(value)) {
    if (std::find(entries.begin(), entries.end(), entry) != entries.end()) {
      return {};
    }
    if (entry.rfind(prefix, 0) != 0) {
      break;
    }
    entries.push_back(entry);
  }
  return entries;
}

std::vector<long long> ordinals(const std::string& value) {
  std::vector<long long> entries;
  for (const std::string& entry : splitOnCommas(value)) {
    const long long ordinal = leadingOrdinal(trimmed(entry));
    if (std::find(entries.begin(), entries.end(), ordinal) != entries.end()) {
      return {};
    }
    if (ordinal < 0) {
      break;
    }
    entries.push_back(ordinal);
  }
  return entries;
}

bool isEmpty(const VisibleDeviceList& list) {
  return std::visit([](const auto& entries) { return entries.empty(); }, list);
}

bool isMigList(const VisibleDeviceList& list) {
  const auto* uuids = std::get_if<std::vector<std::string>>(&list);
  return uuids != nullptr && uuids->front().rfind("MIG-", 0) == 0;
}

// The physical NVML indices, in CUDA ordinal order, `list` selects.
std::vector<int> selectedIndices(const std::optional<VisibleDeviceList>& list,
                                 const detail::NvmlDevices& devices) {
  const int physical = static_cast<int>(devices.uuids.size());
  std::vector<int> indices;
  if (!list) {
    for (int index = 0; index < physical; ++index) {
      indices.push_back(index);
    }
  } else if (const auto* wanted = std::get_if<std::vector<long long>>(&*list)) {
    for (const long long index : *wanted) {
      if (index >= physical) {
        break;  // an ordinal past the last device hides the rest
      }
      indices.push_back(static_cast<int>(index));
    }
  } else {
    indices = ordinalsOfUuidPrefixes(std::get<std::vector<std::string>>(*list), devices.uuids);
  }
  return indices;
}

// CUDA numbers devices fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID;
// NVML in PCI order. The two agree when every device is the same model.
bool nvmlOrderIsCudaOrder(const detail::NvmlDevices& devices) {
  const char* order = std::getenv("CUDA_DEVICE_ORDER");
  if (order != nullptr && std::string_view(order) == "PCI_BUS_ID") {
    return true;
  }
  return std::all_of(devices.names.begin(), devices.names.end(),
                     [&](const std::string& name) { return name == devices.names.front(); });
}

// The bus ids of CUDA ordinals 0..count-1 where NVML's order is not CUDA's:
// the driver's own, or unknown ("") if it cannot say or disagrees on the count.
std::vector<std::string> busIdsInCudaOrder(int count) {
  const VisibleGpus driver = detail::askCudaDriver();
  return driver.count == count ? driver.bus_ids
                               : std::vector<std::string>(static_cast<std::size_t>(count));
}

VisibleGpus countWithNvml(const std::optional<VisibleDeviceList>& list,
                          const detail::NvmlDevices& devices, bool driver_bus_ids) {
  VisibleGpus gpus;
  gpus.counted_by = "NVML";
  for (const int index : selectedIndices(list, devices)) {
    gpus.bus_ids.push_back(devices.bus_ids[static_cast<std::size_t>(index)]);
  }
  gpus.count = static_cast<int>(gpus.bus_ids.size());
  const bool by_uuid = list && std::holds_alternative<std::vector<std::string>>(*list);
  if (gpus.count > 0 && !by_uuid && !nvmlOrderIsCudaOrder(devices)) {
    gpus.bus_ids = driver_bus_ids ? busIdsInCudaOrder(gpus.count)
                                  : std::vector<std::string>(static_cast<std::size_t>(gpus.count));
  }
  if (gpus.count == 0) {
    gpus.why_none = devices.uuids.empty()
                        ? "NVML reports no device"
                        : "CUDA_VISIBLE_DEVICES names none of the " +
                              std::to_string(devices.uuids.size()) + " devices NVML reports";
  }
  return gpus;
}

}  // namespace

std::optional<VisibleDeviceList> parseVisibleDevices(const std::optional<std::string>& value) {
  if (!value) {
    return std::nullopt;
  }
  for (const char* prefix : {"GPU-", "MIG-"}) {
    if (value->rfind(prefix, 0) == 0) {
      return uuidPrefixes(*value, prefix);
    }
  }
  return ordinals(*value);
}

std::vector<int> ordinalsOfUuidPrefixes(const std::vector<std::string>& prefixes,
                                        const std::vector<std::string>& uuids) {
  std::vector<int> selected;
  for (const std::string& prefix : prefixes) {
    int match = -1;
    for (std::size_t index = 0; index < uuids.size(); ++index) {
      if (uuids[index].rfind(prefix, 0) == 0) {
        match = match == -1 ? static_cast<int>(index) : -2;  // -2: ambiguous
      }
    }
    if (match < 0) {
      break;
    }
    if (std::find(selected.begin(), selected.end(), match) != selected.end()) {
      return {};
    }
    selected.push_back(match);
  }
  return selected;
}

VisibleGpus probeVisibleGpus(const std::optional<std::string>& cuda_visible_devices,
                             GpuLibraries libraries, bool exact_bus_ids) {
  const std::optional<VisibleDeviceList> list = parseVisibleDevices(cuda_visible_devices);
  if (list && isEmpty(*list)) {
    VisibleGpus none;
    none.counted_by = "CUDA_VISIBLE_DEVICES";
    none.why_none = cuda_visible_devices->empty()
                        ? "CUDA_VISIBLE_DEVICES is set and empty, which hides every GPU"
                        : "CUDA_VISIBLE_DEVICES='" + *cuda_visible_devices +
                              "' selects no device (a repeated entry, or none is a device)";
    return none;
  }
  std::string nvml_why_not = "NVML: not asked, CUDA_VISIBLE_DEVICES lists MIG devices";
  if (!list || !isMigList(*list)) {
    const detail::NvmlAnswer nvml = detail::askNvml();
    if (nvml.devices) {
      return countWithNvml(list, *nvml.devices,
                           exact_bus_ids && libraries == GpuLibraries::kNvmlThenDriver);
    }
    nvml_why_not = nvml.why_not;
  }
  if (libraries == GpuLibraries::kNvmlOnly) {
    VisibleGpus none;
    none.why_none = nvml_why_not;
    return none;
  }
  VisibleGpus gpus = detail::askCudaDriver();
  if (gpus.count == 0) {
    gpus.why_none = nvml_why_not + "; " + gpus.why_none;
  }
  return gpus;
}

std::string toJson(const VisibleGpus& gpus) {
  return nlohmann::json{{"count", gpus.count},
                        {"counted_by", gpus.counted_by},
                        {"why_none", gpus.why_none},
                        {"bus_ids", gpus.bus_ids}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

VisibleGpus visibleGpusFromJson(std::string_view text) {
  try {
    std::string why;
    const auto json = parseJson(text, &why);
    if (json.is_discarded()) {
      throw Error("not a GPU count: " + why);
    }
    VisibleGpus gpus;
    gpus.count = json.at("count").get<int>();
    gpus.counted_by = json.at("counted_by").get<std::string>();
    gpus.why_none = json.at("why_none").get<std::string>();
    gpus.bus_ids = json.at("bus_ids").get<std::vector<std::string>>();
    if (gpus.count < 0 || (gpus.count > 0 && gpus.bus_ids.size() != std::size_t(gpus.count))) {
      throw Error("count and bus ids disagree");
    }
    return gpus;
  } catch (const nlohmann::json::exception& error) {
    throw Error(std::string("not a GPU count: ") + error.what());
  }
}

}  // namespace ddprun::proto
