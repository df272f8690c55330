// FixtureReplayer owns the client side of one capture replayed against a
// live server: one RawConnection per captured connection id, opened when
// its "open" record comes up. It walks the records in file order, which
// respects causality (the relay logged each chunk before forwarding it):
//   open  -> connect;
//   C>S   -> send exactly that chunk, so a lone type byte stays a lone write;
//   S>C   -> read exactly that many bytes and require them byte-identical;
//   C>S end of stream -> half-close;
//   S>C end of stream -> require the close (when the client closed first).
// When two client chunks of one connection follow each other with no reply
// between them, the capture proves no reply was due yet, so the replayer
// also requires silence for kQuietWindow before sending the second: that
// gives the server time to parse the partial input on its own and catches a
// reply to a half request. Hooks run after a given line, to do what a peer
// missing from the capture did (e.g. rank 0's SETs). moveBefore() fixes the
// order of requests that raced on different connections, where the captured
// replies show which one the real server ran first. Gtest failures name the
// fixture, line and connection. One test thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "ddprun/test_support/fixture_log.hpp"
#include "ddprun/test_support/raw_connection.hpp"

namespace ddprun::wire_test {

using test_support::RawConnection;

class FixtureReplayer {
 public:
  using Hook = std::function<void()>;

  FixtureReplayer(const test_support::FixtureLog& log, std::uint16_t port);

  // Runs `hook` right after the record at `line` has been replayed.
  void after(int line, Hook hook);

  // Replays the record at `line` just before the one at `before_line`
  // instead of in file order. For requests of two connections that were in
  // flight together: file order is only the order the relay read them in,
  // while the replies (e.g. who got 1 from an ADD) show the server's order.
  void moveBefore(int line, int before_line);

  // Replays records (in replay order) until the one at `line` is done.
  // Returns false at the first mismatch (a gtest failure is recorded).
  bool replayThrough(int line);
  // Everything left, then expectNoStrayBytes().
  bool replayAll();
  // Passes over records until the one at `line` without replaying them: what this
  // server must not reproduce (e.g. a real server's stray byte).
  void skipThrough(int line);

  RawConnection& connection(int conn);

  // Fails if a connection still open holds bytes the capture lacks.
  bool expectNoStrayBytes();

 private:
  // Index into order_ of the record at `line`; order_.size() if none.
  std::size_t positionOf(int line) const;
  bool replay(const test_support::Record& record);
  bool sendChunk(const test_support::Record& record);
  bool expectChunk(const test_support::Record& record);
  bool endStream(const test_support::Record& record);
  std::string where(const test_support::Record& record) const;

  const test_support::FixtureLog& log_;
  std::uint16_t port_;
  std::map<int, RawConnection> conns_;
  std::map<int, test_support::Direction>
      last_dir_;  // direction of each connection's last replayed record
  std::set<int> half_closed_;
  std::map<int, std::vector<Hook>> hooks_;
  std::vector<std::size_t> order_;  // indices into log_.records(), in replay order
  std::size_t next_ = 0;            // index into order_ of the next record to replay
};

}  // namespace ddprun::wire_test
