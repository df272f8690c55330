#include "wire_client.hpp"

#include <cstring>

#include "ddprun/test_support/hex.hpp"

namespace ddprun::wire_test {

std::string encode(Dialect dialect, Command command, std::vector<std::string_view> keys,
                   std::vector<std::string_view> values, std::int64_t number, std::uint32_t word) {
  return proto::encodeRequest(
      dialect, proto::makeRequest(command, std::move(keys), std::move(values), number, word));
}

std::string validateRequest() {
  return encode(Dialect::Modern, Command::Validate, {}, {}, 0, proto::kValidateMagic);
}

std::string pingRequest(std::uint32_t nonce) {
  return encode(Dialect::Modern, Command::Ping, {}, {}, 0, nonce);
}

std::string u8Reply(std::uint8_t value) { return std::string(1, static_cast<char>(value)); }

std::string i64Reply(std::int64_t value) {
  std::string out;
  proto::WireWriter(out).i64(value);
  return out;
}

std::string u32Reply(std::uint32_t value) {
  std::string out;
  proto::WireWriter(out).u32(value);
  return out;
}

std::string bytesReply(std::string_view value) {
  std::string out;
  proto::WireWriter(out).bytes(value);
  return out;
}

WireClient::WireClient(std::uint16_t port, Dialect dialect) : conn_(port), dialect_(dialect) {
  if (dialect_ == Dialect::Modern) {
    conn_.sendAll(validateRequest());
  }
}

void WireClient::set(std::string_view key, std::string_view value) {
  conn_.sendAll(encode(dialect_, Command::Set, {key}, {value}));
}

std::optional<std::int64_t> WireClient::add(std::string_view key, std::int64_t delta) {
  conn_.sendAll(encode(dialect_, Command::Add, {key}, {}, delta));
  const auto reply = conn_.recvExact(sizeof(std::int64_t), kReplyTimeout);
  if (!reply) {
    return std::nullopt;
  }
  std::int64_t value = 0;
  std::memcpy(&value, reply->data(), sizeof(value));
  return value;
}

std::optional<std::string> WireClient::get(std::string_view key) {
  conn_.sendAll(encode(dialect_, Command::Wait, {key}));
  const auto stop_waiting = conn_.recvExact(1, kReplyTimeout);
  if (stop_waiting != u8Reply(0)) {
    return std::nullopt;
  }
  conn_.sendAll(encode(dialect_, Command::Get, {key}));
  return readBytesReply();
}

std::optional<std::string> WireClient::readBytesReply() {
  const auto header = conn_.recvExact(sizeof(std::uint64_t), kReplyTimeout);
  if (!header) {
    return std::nullopt;
  }
  std::uint64_t size = 0;
  std::memcpy(&size, header->data(), sizeof(size));
  return conn_.recvExact(static_cast<std::size_t>(size), kReplyTimeout);
}

::testing::AssertionResult WireClient::roundTrip() {
  // Short (at most 13 bytes), so it fits tests that lower --max-key-bytes.
  const std::string key =
      "/r" + std::to_string(conn_.localPort()) + "." + std::to_string(++round_trips_);
  const std::string value = "value-" + key;
  set(key, value);
  const auto got = get(key);
  if (got == value) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "SET/GET round trip on " << conn_.localAddress() << " failed: got "
         << (got ? "'" + *got + "'" : std::string("no reply"))
         << "; unread bytes: " << test_support::toHex(conn_.buffered())
         << (conn_.peerClosed() ? " (peer closed)" : "");
}

}  // namespace ddprun::wire_test
