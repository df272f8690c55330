// Writing a whole buffer to a descriptor, through short writes and EINTR:
// the one loop for it (the consoles, the relays' files, the workers' event
// files, the guardian's answer to its agent). Stateless; any thread.
#pragma once

#include <string_view>

namespace ddprun::launcher {

// Writes all of `bytes` to `fd`; gives up quietly when the descriptor fails
// (a console or disk gone away, a reader that has died): every caller's
// output is best effort.
void writeAll(int fd, std::string_view bytes);

}  // namespace ddprun::launcher
