#include "ddprun/test_support/fixture_log.hpp"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "ddprun/test_support/hex.hpp"

#ifndef DDPRUN_FIXTURES_DIR
#define DDPRUN_FIXTURES_DIR ""
#endif

namespace ddprun::test_support {

namespace {

Direction parseDirection(const std::string& dir) {
  if (dir == "open") {
    return Direction::Open;
  }
  if (dir == "C>S") {
    return Direction::ClientToServer;
  }
  if (dir == "S>C") {
    return Direction::ServerToClient;
  }
  // The newer relay also writes "C>S-err"/"S>C-err"; the committed captures
  // have none, and a replay would not know what to do with one.
  throw std::runtime_error("unknown direction '" + dir + "'");
}

Record parseRecord(const std::string& text, int line) {
  const auto json = nlohmann::json::parse(text);
  Record record;
  record.line = line;
  record.conn = json.at("conn").get<int>();
  record.dir = parseDirection(json.at("dir").get<std::string>());
  record.bytes = fromHex(json.at("hex").get<std::string>());
  return record;
}

}  // namespace

FixtureLog FixtureLog::load(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error("cannot open fixture " + path.string());
  }
  FixtureLog log;
  log.name_ = path.filename().string();
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (text.empty()) {
      continue;
    }
    try {
      log.records_.push_back(parseRecord(text, line));
    } catch (const std::exception& error) {
      throw std::runtime_error(log.name_ + ":" + std::to_string(line) + ": " + error.what());
    }
  }
  return log;
}

const Record& FixtureLog::atLine(int line) const {
  for (const Record& record : records_) {
    if (record.line == line) {
      return record;
    }
  }
  throw std::out_of_range(name_ + " has no line " + std::to_string(line));
}

std::vector<int> FixtureLog::connections() const {
  std::set<int> ids;
  for (const Record& record : records_) {
    ids.insert(record.conn);
  }
  return {ids.begin(), ids.end()};
}

std::string FixtureLog::stream(int conn, Direction dir) const {
  std::string out;
  for (const Record& record : records_) {
    if (record.conn == conn && record.dir == dir) {
      out += record.bytes;
    }
  }
  return out;
}

std::filesystem::path fixturesDir() {
  if (const char* env = std::getenv("DDPRUN_FIXTURES_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return DDPRUN_FIXTURES_DIR;
}

std::optional<std::string> fixturesProblem() {
  const std::filesystem::path dir = fixturesDir();
  const std::string fix =
      ". They ship with the repository in tests/fixtures/tcpstore/: restore them, or point "
      "DDPRUN_FIXTURES_DIR (environment or CMake cache variable) at a copy";
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return "TCPStore captures missing: '" + dir.string() + "' is not a directory" + fix;
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".jsonl") {
      return std::nullopt;
    }
  }
  return "TCPStore captures missing: '" + dir.string() + "' holds no *.jsonl file" + fix;
}

}  // namespace ddprun::test_support
