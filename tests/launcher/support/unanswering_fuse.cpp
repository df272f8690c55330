// unanswering_fuse MOUNTPOINT: a FUSE file system whose server never answers
// a flush or a read, to put a process really in uninterruptible sleep (the
// stuck-worker tests). Spoken straight to /dev/fuse, without libfuse.
//
// It mounts one file, "hang", at MOUNTPOINT in a mount namespace of its own,
// so the mount is no one else's and goes with this process; others reach
// the file as /proc/<its pid>/root<MOUNTPOINT>/hang. Lookups, attributes and
// opens are answered; FLUSH (every close(2) of the file, and the implicit
// one when a process holding it exits), READ and INTERRUPT never are. The
// kernel waits for the answer to a request the server has read
// (request_wait_answer): interruptibly until a signal comes, then killably
// (state D) until a fatal one, then uninterruptibly (state D), for ever.
// A process exiting with the file open, a fatal signal pending, flushes it
// and sits in D at once; SIGKILL cannot end either wait.
//
// Prints "ready" on stdout once mounted, and a line on stderr for each
// request it leaves unanswered ("unanswered FLUSH"). Exits 77 naming why when
// it cannot mount (not root, no /dev/fuse, no right to mount). Killing it
// closes /dev/fuse, which aborts the connection: every request still waiting
// fails (ENOTCONN) and whoever was stuck on it goes on.
#include <fcntl.h>
#include <linux/fuse.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kCannotMount = 77;
constexpr std::uint64_t kRoot = FUSE_ROOT_ID;
constexpr std::uint64_t kHangFile = 2;

int fuse_fd = -1;

[[noreturn]] void cannot(const char* what) {
  std::fprintf(stderr, "unanswering_fuse: %s: %s\n", what, std::strerror(errno));
  std::exit(kCannotMount);
}

void reply(std::uint64_t unique, int error, const void* body = nullptr, std::size_t size = 0) {
  fuse_out_header header{};
  header.len = static_cast<std::uint32_t>(sizeof header + size);
  header.error = error;
  header.unique = unique;
  std::vector<char> message(header.len);
  std::memcpy(message.data(), &header, sizeof header);
  if (size > 0) {
    std::memcpy(message.data() + sizeof header, body, size);
  }
  if (::write(fuse_fd, message.data(), message.size()) < 0) {
    std::fprintf(stderr, "unanswering_fuse: reply: %s\n", std::strerror(errno));
  }
}

fuse_attr attributesOf(std::uint64_t node) {
  fuse_attr attributes{};
  attributes.ino = node;
  attributes.mode = node == kRoot ? (S_IFDIR | 0755) : (S_IFREG | 0644);
  attributes.nlink = node == kRoot ? 2 : 1;
  return attributes;
}

void answerInit(const fuse_in_header& in, const char* body) {
  fuse_init_out out{};
  out.major = FUSE_KERNEL_VERSION;
  out.minor = FUSE_KERNEL_MINOR_VERSION;
  out.max_readahead = reinterpret_cast<const fuse_init_in*>(body)->max_readahead;
  out.max_background = 16;
  out.congestion_threshold = 12;
  out.max_write = 4096;
  out.time_gran = 1;
  reply(in.unique, 0, &out, sizeof out);
}

void answerLookup(const fuse_in_header& in, const char* name) {
  if (in.nodeid != kRoot || std::strcmp(name, "hang") != 0) {
    reply(in.unique, -ENOENT);
    return;
  }
  fuse_entry_out out{};
  out.nodeid = kHangFile;
  out.generation = 1;
  out.attr = attributesOf(kHangFile);
  reply(in.unique, 0, &out, sizeof out);
}

const char* unansweredName(std::uint32_t opcode) {
  switch (opcode) {
    case FUSE_FLUSH:
      return "FLUSH";
    case FUSE_READ:
      return "READ";
    case FUSE_INTERRUPT:
      return "INTERRUPT";
    default:
      return nullptr;
  }
}

void serve(const fuse_in_header& in, const char* body) {
  if (const char* name = unansweredName(in.opcode)) {
    std::fprintf(stderr, "unanswered %s\n", name);
    return;
  }
  switch (in.opcode) {
    case FUSE_INIT:
      answerInit(in, body);
      return;
    case FUSE_LOOKUP:
      answerLookup(in, body);
      return;
    case FUSE_GETATTR: {
      fuse_attr_out out{};
      out.attr = attributesOf(in.nodeid);
      reply(in.unique, 0, &out, sizeof out);
      return;
    }
    case FUSE_OPEN: {
      fuse_open_out out{};
      out.fh = 1;
      reply(in.unique, 0, &out, sizeof out);
      return;
    }
    case FUSE_RELEASE:
      reply(in.unique, 0);
      return;
    case FUSE_FORGET:
    case FUSE_BATCH_FORGET:
      return;  // never answered, by the protocol
    default:
      reply(in.unique, -ENOSYS);
  }
}

void mountAt(const char* mountpoint) {
  if (::unshare(CLONE_NEWNS) != 0) {
    cannot("unshare(CLONE_NEWNS)");
  }
  // Nothing mounted here propagates back to the namespace it came from.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    cannot("making / private");
  }
  fuse_fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fuse_fd < 0) {
    cannot("/dev/fuse");
  }
  const std::string options =
      "fd=" + std::to_string(fuse_fd) + ",rootmode=40000,user_id=0,group_id=0,allow_other";
  if (::mount("unanswering", mountpoint, "fuse.unanswering", MS_NOSUID | MS_NODEV,
              options.c_str()) != 0) {
    cannot("mount -t fuse");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: unanswering_fuse MOUNTPOINT\n");
    return 2;
  }
  mountAt(argv[1]);
  std::printf("ready\n");
  std::fflush(stdout);
  std::vector<char> request(FUSE_MIN_READ_BUFFER + 4096 * 2);  // max_write is 4096
  for (;;) {
    const ssize_t got = ::read(fuse_fd, request.data(), request.size());
    if (got < 0 && (errno == EINTR || errno == ENOENT)) {
      continue;  // ENOENT: a request interrupted before it was read
    }
    if (got < static_cast<ssize_t>(sizeof(fuse_in_header))) {
      std::fprintf(stderr, "unanswering_fuse: read /dev/fuse: %s\n", std::strerror(errno));
      return 1;
    }
    const auto* in = reinterpret_cast<const fuse_in_header*>(request.data());
    serve(*in, request.data() + sizeof *in);
  }
}
