// A file in memory (memfd) a child writes its output to, read back once the
// child has ended: the one way ddprun and its tests capture a helper's
// output. Memory rather than a pipe: nothing has to drain it while the
// child runs, so a chatty child never blocks on a full pipe.
//
// Owns the descriptor (close-on-exec; SpawnOptions' dup2 hands it to the
// child). Used by one thread.
#pragma once

#include <string>

namespace ddprun::launcher {

class MemoryFile {
 public:
  // Throws std::system_error when memfd_create fails (no descriptor left).
  explicit MemoryFile(const char* name);
  ~MemoryFile();
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  int fd() const { return fd_; }
  // Everything written to it so far.
  std::string text() const;

 private:
  int fd_;
};

}  // namespace ddprun::launcher
