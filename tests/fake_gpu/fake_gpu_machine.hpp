// A pretend GPU machine shared by the fake libcuda.so.1 and
// libnvidia-ml.so.1 the tests put first on a ddprun's library path. Set by
// the test through the environment of the process that loads them:
//   FAKE_GPU_COUNT        physical devices (default 0)
//   FAKE_GPU_CUINIT_ERROR what cuInit returns instead of starting
//   FAKE_GPU_NVML_ERROR   what nvmlInit_v2 returns instead of starting
//   FAKE_GPU_CRASH        "cuInit"/"nvmlInit_v2": that call crashes (SIGSEGV)
//   FAKE_GPU_HANG         "cuInit"/"nvmlInit_v2": that call never returns
//   FAKE_GPU_FAST         the index of one faster model: NVML names it
//                         differently, and CUDA numbers it first unless
//                         CUDA_DEVICE_ORDER=PCI_BUS_ID
//   FAKE_GPU_CALL_LOG     a file each init appends "<pid> <call>\n" to
// A successful init leaves what a real one leaves in its process: a thread
// of its own and resident memory (FAKE_GPU_RESIDENT_MIB, default 32), so a
// test can see whether a process ever asked. Device i's UUID starts
// "GPU-<i in hex>", its PCI bus is 0x18 + 0x10 * i.
#pragma once

#include <string>

namespace fake_gpu {

int physicalCount();
std::string uuidOf(int index);
std::string nameOf(int index);  // "Fake GPU", or "Fake GPU Fast" for FAKE_GPU_FAST
unsigned busOf(int index);
// FAKE_GPU_<name> as an int; `otherwise` when unset.
int setting(const char* name, int otherwise);
// Logs the call, crashes or hangs if asked to, then starts the footprint: a
// thread that sleeps for ever and FAKE_GPU_RESIDENT_MIB touched.
void startLikeADriver(const char* call);

}  // namespace fake_gpu
