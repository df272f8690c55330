// FixtureLog owns one parsed relay capture from tests/fixtures/tcpstore/
// (JSONL: one record per recv() chunk, see that directory's README.md). It
// keeps the records in file order with their 1-based line numbers, which is
// how the fixtures' README and the tests name them. Immutable after loading;
// safe to share between threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ddprun::test_support {

enum class Direction : std::uint8_t { Open, ClientToServer, ServerToClient };

struct Record {
  int line = 0;  // 1-based line in the file
  int conn = 0;  // the relay's connection id
  Direction dir = Direction::Open;
  std::string bytes;  // raw bytes of one recv(); empty on C>S/S>C means end of stream

  bool endOfStream() const { return dir != Direction::Open && bytes.empty(); }
};

class FixtureLog {
 public:
  // Throws std::runtime_error naming the file and line on malformed input.
  static FixtureLog load(const std::filesystem::path& path);

  const std::string& name() const { return name_; }
  const std::vector<Record>& records() const { return records_; }
  const Record& atLine(int line) const;  // throws std::out_of_range

  // The connection ids, ascending.
  std::vector<int> connections() const;
  // All bytes one side sent on one connection, in order.
  std::string stream(int conn, Direction dir) const;

 private:
  std::string name_;
  std::vector<Record> records_;
};

// Where the captures live: the DDPRUN_FIXTURES_DIR CMake cache variable,
// overridable at run time by the environment variable of the same name.
std::filesystem::path fixturesDir();

// Why the captures cannot be read: fixturesDir() is missing or holds no
// *.jsonl file. nullopt when they can. The captures ship with the repository,
// so their absence means a broken checkout or a wrong override: tests that
// need them fail with this message instead of skipping.
std::optional<std::string> fixturesProblem();

}  // namespace ddprun::test_support
