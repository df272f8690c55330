// hwloc's functions, loaded from its shared library the first time a CPU
// topology is read (--numa-binding), not when ddprun starts.
//
// Linked, libhwloc and the libudev it needs were mapped and relocated at
// every start of ddprun: 0.2 ms of a launch that needs neither
// (docs/benchmarks.md, "Loading hwloc when it is used, and the rest of a
// launch's fixed cost"). hwloc's helpers that are inline in its header
// (hwloc_get_next_obj_by_type and the like) call into the library, so
// cpu_topology.cpp walks the objects itself with these.
// Built once, under a function-local static; read from any thread.
#pragma once

#include <hwloc.h>

#include <string>

namespace ddprun::launcher::detail {

struct HwlocLibrary {
  decltype(&hwloc_get_api_version) get_api_version = nullptr;
  decltype(&hwloc_topology_init) topology_init = nullptr;
  decltype(&hwloc_topology_load) topology_load = nullptr;
  decltype(&hwloc_topology_destroy) topology_destroy = nullptr;
  decltype(&hwloc_topology_set_synthetic) topology_set_synthetic = nullptr;
  decltype(&hwloc_get_type_depth) get_type_depth = nullptr;
  decltype(&hwloc_get_obj_by_depth) get_obj_by_depth = nullptr;
  decltype(&hwloc_bitmap_isset) bitmap_isset = nullptr;
  decltype(&hwloc_bitmap_first) bitmap_first = nullptr;
  decltype(&hwloc_obj_type_is_dcache) obj_type_is_dcache = nullptr;
};

// The library of the soname ddprun was built against (libhwloc.so.15 for
// hwloc 2.x), loaded once. Throws ddprun::Error naming the library and why
// when it cannot be loaded, lacks a function, or has another major version.
const HwlocLibrary& hwloc();

// The same for `soname`, loaded anew (tests give one that is not there).
HwlocLibrary loadHwloc(const std::string& soname);

}  // namespace ddprun::launcher::detail
