#include "hwloc_library.hpp"

#include <dlfcn.h>

#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher::detail {
namespace {

// The soname of the library the build's headers describe: hwloc 2.x is ABI 15.
constexpr char kSoname[] = "libhwloc.so.15";

std::string cannotLoad(const std::string& soname, const std::string& why) {
  return "cannot read the machine's CPU topology: cannot load hwloc (" + soname + "): " + why;
}

template <typename Function>
void resolve(void* library, const std::string& soname, const char* name, Function& function) {
  function = reinterpret_cast<Function>(dlsym(library, name));
  if (function == nullptr) {
    throw Error(cannotLoad(soname, std::string("it lacks ") + name));
  }
}

}  // namespace

HwlocLibrary loadHwloc(const std::string& soname) {
  // Never closed: a topology's memory is freed by the library's own code.
  void* library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    throw Error(cannotLoad(soname, why != nullptr ? why : "dlopen failed"));
  }
  HwlocLibrary api;
  resolve(library, soname, "hwloc_get_api_version", api.get_api_version);
  resolve(library, soname, "hwloc_topology_init", api.topology_init);
  resolve(library, soname, "hwloc_topology_load", api.topology_load);
  resolve(library, soname, "hwloc_topology_destroy", api.topology_destroy);
  resolve(library, soname, "hwloc_topology_set_synthetic", api.topology_set_synthetic);
  resolve(library, soname, "hwloc_get_type_depth", api.get_type_depth);
  resolve(library, soname, "hwloc_get_obj_by_depth", api.get_obj_by_depth);
  resolve(library, soname, "hwloc_bitmap_isset", api.bitmap_isset);
  resolve(library, soname, "hwloc_bitmap_first", api.bitmap_first);
  resolve(library, soname, "hwloc_obj_type_is_dcache", api.obj_type_is_dcache);
  // hwloc's own rule: the same major version (0xXX0000) has the same ABI.
  if ((api.get_api_version() >> 16) != (HWLOC_API_VERSION >> 16)) {
    throw Error(cannotLoad(soname, "its API version is " + std::to_string(api.get_api_version()) +
                                       ", ddprun was built for " +
                                       std::to_string(HWLOC_API_VERSION)));
  }
  return api;
}

const HwlocLibrary& hwloc() {
  static const HwlocLibrary api = loadHwloc(kSoname);  // a throw is retried next call
  return api;
}

}  // namespace ddprun::launcher::detail
