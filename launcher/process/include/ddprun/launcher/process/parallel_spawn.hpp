// Starts a group of subprocesses two at a time. A Subprocess's start waits
// for its child's exec (the child shares the agent's memory until then, as
// posix_spawn's does), so starting N workers one after the other is N execs
// end to end; here the calling thread starts the even ones while a thread of
// this object's starts the odd ones, and two execs run side by side.
//
// Owns that thread: started by the first group of two or more, kept until
// finish() or the destructor. It must outlive the children it started, because a
// child's death signal (PR_SET_PDEATHSIG) follows the thread that started
// it, not the process: destroy a ParallelSpawn only after its children have
// ended (the agent's outlives its workers). One thread calls startAll at a
// time; the group's results come back to it. The odd members inherit that
// thread's attributes (nice value, CPU affinity, every signal blocked until
// the child sets its own mask) as the caller's were when it was made.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"

namespace ddprun::launcher {

// One member of a group: its process and when its start returned (its exec
// done), or why it could not be started (a SpawnError, as Subprocess's
// constructor throws it).
struct SpawnOutcome {
  std::optional<Subprocess> process;
  std::chrono::steady_clock::time_point started_at;
  std::exception_ptr error;
};

class ParallelSpawn {
 public:
  ParallelSpawn() = default;
  ~ParallelSpawn();
  ParallelSpawn(const ParallelSpawn&) = delete;
  ParallelSpawn& operator=(const ParallelSpawn&) = delete;

  // One outcome per entry of `group`, in its order; each member is started
  // whatever became of the others. Without a thread of its own (one member,
  // or the thread could not be made) they start one after the other here.
  std::vector<SpawnOutcome> startAll(const std::vector<SpawnOptions>& group);
  // No group will follow: the thread is told to end, without waiting for it
  // (the destructor joins it, by then most likely at once). Call it once
  // every child the thread started has been reaped.
  void finish();

 private:
  bool haveThread();
  void awaitThread() noexcept;
  static void startEvery(std::size_t first, std::size_t step,
                         const std::vector<SpawnOptions>& group,
                         std::vector<SpawnOutcome>& outcomes);
  void serve();  // the thread's loop

  std::mutex mutex_;
  std::condition_variable changed_;
  const std::vector<SpawnOptions>* group_ = nullptr;  // the odd members to start, when set
  std::vector<SpawnOutcome>* outcomes_ = nullptr;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ddprun::launcher
