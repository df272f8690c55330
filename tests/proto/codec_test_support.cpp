#include "codec_test_support.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace ddprun::proto {

void PrintTo(DecodeStatus status, std::ostream* os) {
  switch (status) {
    case DecodeStatus::Complete:
      *os << "Complete";
      return;
    case DecodeStatus::NeedMore:
      *os << "NeedMore";
      return;
    case DecodeStatus::Bad:
      *os << "Bad";
      return;
  }
  *os << "DecodeStatus(" << static_cast<int>(status) << ")";
}

void PrintTo(Command command, std::ostream* os) { *os << commandName(command); }
void PrintTo(Dialect dialect, std::ostream* os) { *os << dialectName(dialect); }

}  // namespace ddprun::proto

namespace ddprun::proto::testing {
namespace {

OwnedRequest make(Command command, std::vector<std::string> keys = {},
                  std::vector<std::string> values = {}, std::int64_t number = 0,
                  std::uint32_t word = 0) {
  return {command, std::move(keys), std::move(values), number, word};
}

// Dialect 2.2+ (D to G). Hex verbatim from docs/tcpstore-protocol.md Appendix A.1
// and the 2.6 capture, except the 2.8+ queues and 2.10+ LIST, laid out from
// its §7.16 and §7.17.
std::vector<GoldenCase> modernCases() {
  const Dialect d = Dialect::Modern;
  return {
      {"Validate", d, make(Command::Validate, {}, {}, 0, kValidateMagic), fromHex("00 cef7853c")},
      {"Ping", d, make(Command::Ping, {}, {}, 0, 0x4f6b), fromHex("0d 6b4f0000")},
      {"Set", d, make(Command::Set, {"/k1"}, {"v1"}),
       fromHex("01 0300000000000000 2f6b31 0200000000000000 7631")},
      {"Wait", d, make(Command::Wait, {"/k1"}),
       fromHex("06 0100000000000000 0300000000000000 2f6b31")},
      {"Get", d, make(Command::Get, {"/k1"}), fromHex("03 0300000000000000 2f6b31")},
      {"Add", d, make(Command::Add, {"/cnt"}, {}, 5),
       fromHex("04 0400000000000000 2f636e74 0500000000000000")},
      {"CompareSetCreate", d, make(Command::CompareSet, {"/cs"}, {"", "new"}),
       fromHex("02 0300000000000000 2f6373 0000000000000000 0300000000000000 6e6577")},
      {"CompareSetMissing", d, make(Command::CompareSet, {"/cs2"}, {"x", "y"}),
       fromHex("02 0400000000000000 2f637332 0100000000000000 78 0100000000000000 79")},
      {"Check", d, make(Command::Check, {"/k1", "/nope"}),
       fromHex("05 0200000000000000 0300000000000000 2f6b31 0500000000000000 2f6e6f7065")},
      {"GetNumKeys", d, make(Command::GetNumKeys), fromHex("07")},
      {"DeleteKey", d, make(Command::DeleteKey, {"/k1"}), fromHex("08 0300000000000000 2f6b31")},
      {"Append", d, make(Command::Append, {"/ap"}, {"x"}),
       fromHex("09 0300000000000000 2f6170 0100000000000000 78")},
      {"MultiGet", d, make(Command::MultiGet, {"/m1", "/m2", "/ap"}),
       fromHex("0a 0300000000000000 0300000000000000 2f6d31 0300000000000000 2f6d32 "
               "0300000000000000 2f6170")},
      {"MultiSet", d, make(Command::MultiSet, {"/m1", "/m2"}, {"a", "bb"}),
       fromHex("0b 0200000000000000 0300000000000000 2f6d31 0100000000000000 61 "
               "0300000000000000 2f6d32 0200000000000000 6262")},
      {"CancelWait", d, make(Command::CancelWait), fromHex("0c")},
      {"QueuePush", d, make(Command::QueuePush, {"/q"}, {"a"}),
       fromHex("0e 0200000000000000 2f71 0100000000000000 61")},
      {"QueuePop", d, make(Command::QueuePop, {"/q"}), fromHex("0f 0200000000000000 2f71")},
      {"QueueLen", d, make(Command::QueueLen, {"/q"}), fromHex("10 0200000000000000 2f71")},
      {"List", d, make(Command::List), fromHex("11")},
  };
}

// Dialect A (1.13 and 2.0). Hex verbatim from docs/tcpstore-protocol.md Appendix A.2,
// §7.1 and §7.14; CHECK laid out from §7.5.
std::vector<GoldenCase> legacy113Cases() {
  const Dialect d = Dialect::Legacy113;
  return {
      {"AddInit", d, make(Command::Add, {"init/"}, {}, 1),
       fromHex("03 0500000000000000 696e69742f 0100000000000000")},
      {"Set", d, make(Command::Set, {"/k1"}, {"v1"}),
       fromHex("00 0300000000000000 2f6b31 0200000000000000 7631")},
      {"Wait", d, make(Command::Wait, {"/k1"}),
       fromHex("05 0100000000000000 0300000000000000 2f6b31")},
      {"WaitNoKeys", d, make(Command::Wait), fromHex("05 0000000000000000")},
      {"Get", d, make(Command::Get, {"/k1"}), fromHex("02 0300000000000000 2f6b31")},
      {"AddNegative", d, make(Command::Add, {"/cnt"}, {}, -7),
       fromHex("03 0400000000000000 2f636e74 f9ffffffffffffff")},
      {"CompareSet", d, make(Command::CompareSet, {"/cs"}, {"", "new"}),
       fromHex("01 0300000000000000 2f6373 0000000000000000 0300000000000000 6e6577")},
      {"Check", d, make(Command::Check, {"/k1", "/nope"}),
       fromHex("04 0200000000000000 0300000000000000 2f6b31 0500000000000000 2f6e6f7065")},
      {"GetNumKeys", d, make(Command::GetNumKeys), fromHex("06")},
      {"WatchKey", d, make(Command::WatchKey, {"/watched"}),
       fromHex("07 0800000000000000 2f77617463686564")},
      {"DeleteKey", d, make(Command::DeleteKey, {"/k1"}), fromHex("08 0300000000000000 2f6b31")},
  };
}

// Dialect C (2.1): the same layouts, bytes from the C column of
// docs/tcpstore-protocol.md §5.1.
std::vector<GoldenCase> legacy21Cases() {
  const Dialect d = Dialect::Legacy21;
  return {
      {"Set", d, make(Command::Set, {"/k1"}, {"v1"}),
       fromHex("00 0300000000000000 2f6b31 0200000000000000 7631")},
      {"CompareSet", d, make(Command::CompareSet, {"/cs"}, {"", "new"}),
       fromHex("01 0300000000000000 2f6373 0000000000000000 0300000000000000 6e6577")},
      {"Get", d, make(Command::Get, {"/k1"}), fromHex("02 0300000000000000 2f6b31")},
      {"Add", d, make(Command::Add, {"/cnt"}, {}, 5),
       fromHex("03 0400000000000000 2f636e74 0500000000000000")},
      {"Check", d, make(Command::Check, {"/k1"}),
       fromHex("04 0100000000000000 0300000000000000 2f6b31")},
      {"Wait", d, make(Command::Wait, {"/k1"}),
       fromHex("05 0100000000000000 0300000000000000 2f6b31")},
      {"GetNumKeys", d, make(Command::GetNumKeys), fromHex("06")},
      {"DeleteKey", d, make(Command::DeleteKey, {"/k1"}), fromHex("07 0300000000000000 2f6b31")},
      {"Append", d, make(Command::Append, {"/ap"}, {"x"}),
       fromHex("08 0300000000000000 2f6170 0100000000000000 78")},
      {"MultiGet", d, make(Command::MultiGet, {"/m1", "/m2"}),
       fromHex("09 0200000000000000 0300000000000000 2f6d31 0300000000000000 2f6d32")},
      {"MultiSet", d, make(Command::MultiSet, {"/m1"}, {"a"}),
       fromHex("0a 0100000000000000 0300000000000000 2f6d31 0100000000000000 61")},
      {"CancelWait", d, make(Command::CancelWait), fromHex("0b")},
  };
}

std::vector<GoldenCase> buildGoldenCases() {
  std::vector<GoldenCase> all;
  for (auto* part : {&legacy113Cases, &legacy21Cases, &modernCases}) {
    for (GoldenCase& c : part()) {
      const char* prefix = c.dialect == Dialect::Legacy113  ? "Legacy113_"
                           : c.dialect == Dialect::Legacy21 ? "Legacy21_"
                                                            : "Modern_";
      c.name = prefix + c.name;
      all.push_back(std::move(c));
    }
  }
  return all;
}

std::string u64Bytes(std::uint64_t value) {
  std::string out;
  WireWriter(out).u64(value);
  return out;
}

// The command byte of `command` in `dialect`, then `fields`.
std::string requestBytes(Dialect dialect, Command command, const std::string& fields) {
  return std::string(1, static_cast<char>(wireByte(dialect, command).value())) + fields;
}

std::vector<HostileCase> buildHostileCases() {
  constexpr std::uint64_t k2p63 = std::uint64_t{1} << 63;
  constexpr std::uint64_t kMax = ~std::uint64_t{0};
  const Limits limits;
  const std::string key = u64Bytes(3) + "/k1";
  struct Shape {
    const char* name;
    Dialect dialect;
    Command command;
    std::string prefix;  // fields before the claimed size
    std::uint64_t claimed;
  };
  const std::vector<Shape> shapes = {
      {"SetKey2p63", Dialect::Modern, Command::Set, "", k2p63},
      {"GetKeyMax", Dialect::Modern, Command::Get, "", kMax},
      {"AddKeyJustOverLimit", Dialect::Legacy113, Command::Add, "", limits.max_key_bytes + 1},
      {"WatchKey2p63", Dialect::Legacy113, Command::WatchKey, "", k2p63},
      {"SetValue2p63", Dialect::Legacy113, Command::Set, key, k2p63},
      {"SetValueJustOverLimit", Dialect::Modern, Command::Set, key, limits.max_value_bytes + 1},
      {"CompareSetDesired2p63", Dialect::Modern, Command::CompareSet, key + u64Bytes(0), k2p63},
      {"AppendValueMax", Dialect::Legacy21, Command::Append, key, kMax},
      {"QueuePushValue2p63", Dialect::Modern, Command::QueuePush, key, k2p63},
      {"WaitCount2p63", Dialect::Legacy113, Command::Wait, "", k2p63},
      {"CheckCountMax", Dialect::Modern, Command::Check, "", kMax},
      {"MultiGetCountJustOverLimit", Dialect::Legacy21, Command::MultiGet, "",
       limits.max_keys_per_request + 1},
      {"MultiSetCount2p63", Dialect::Modern, Command::MultiSet, "", k2p63},
      {"WaitListKey2p63", Dialect::Modern, Command::Wait, u64Bytes(1), k2p63},
      {"MultiSetValue2p63", Dialect::Modern, Command::MultiSet, u64Bytes(1) + key, k2p63},
  };
  std::vector<HostileCase> cases;
  for (const Shape& shape : shapes) {
    cases.push_back(
        {shape.name, shape.dialect,
         requestBytes(shape.dialect, shape.command, shape.prefix + u64Bytes(shape.claimed)),
         std::to_string(shape.claimed)});
  }
  return cases;
}

// Checks one NeedMore against what is buffered and what the request will need.
void expectUsefulHint(const DecodeResult& result, std::size_t buffered, const Limits& limits) {
  EXPECT_GT(result.size, buffered) << "a NeedMore hint must ask for more than is buffered";
  EXPECT_LE(result.size, limits.max_request_bytes) << "a NeedMore hint must stay within the limit";
}

}  // namespace

OwnedRequest own(const Request& request) {
  OwnedRequest owned{request.command, {}, {}, request.number, request.word};
  owned.keys.assign(request.keys.begin(), request.keys.end());
  owned.values.assign(request.values.begin(), request.values.end());
  return owned;
}

Request view(const OwnedRequest& owned) {
  Request request;
  request.command = owned.command;
  request.keys.assign(owned.keys.begin(), owned.keys.end());
  request.values.assign(owned.values.begin(), owned.values.end());
  request.number = owned.number;
  request.word = owned.word;
  return request;
}

std::string encode(Dialect dialect, const OwnedRequest& request) {
  std::string out;
  encodeRequest(dialect, view(request), out);
  return out;
}

void PrintTo(const OwnedRequest& request, std::ostream* os) {
  *os << commandName(request.command) << " keys=[";
  for (const auto& key : request.keys) {
    *os << toHex(key) << ' ';
  }
  *os << "] values=[";
  for (const auto& value : request.values) {
    *os << toHex(value) << ' ';
  }
  *os << "] number=" << request.number << " word=" << request.word;
}

void PrintTo(const GoldenCase& golden, std::ostream* os) { *os << golden.name; }
void PrintTo(const HostileCase& hostile, std::ostream* os) { *os << hostile.name; }

StreamDecode decodeStream(RequestDecoder& decoder, std::string_view stream) {
  StreamDecode out;
  Request request;
  while (true) {
    out.last = decoder.decode(stream.substr(out.consumed), request);
    if (out.last.status != DecodeStatus::Complete) {
      return out;
    }
    out.requests.push_back(own(request));
    out.sizes.push_back(out.last.size);
    out.consumed += out.last.size;
  }
}

StreamDecode decodeInChunks(RequestDecoder& decoder, std::string_view stream, std::size_t chunk) {
  StreamDecode out;
  std::string buffer;
  Request request;
  for (std::size_t at = 0; at < stream.size(); at += chunk) {
    buffer.append(stream.substr(at, chunk));
    while (true) {
      out.last = decoder.decode(buffer, request);
      if (out.last.status == DecodeStatus::NeedMore) {
        expectUsefulHint(out.last, buffer.size(), decoder.limits());
        break;
      }
      if (out.last.status == DecodeStatus::Bad) {
        return out;
      }
      out.requests.push_back(own(request));
      out.sizes.push_back(out.last.size);
      out.consumed += out.last.size;
      buffer.erase(0, out.last.size);
    }
  }
  return out;
}

StreamDecode decodeByteByByte(RequestDecoder& decoder, std::string_view stream) {
  return decodeInChunks(decoder, stream, 1);
}

const std::vector<GoldenCase>& goldenCases() {
  static const std::vector<GoldenCase> kCases = buildGoldenCases();
  return kCases;
}

const std::vector<HostileCase>& hostileCases() {
  static const std::vector<HostileCase> kCases = buildHostileCases();
  return kCases;
}

RequestDecoder decoderAfterPreamble(Dialect dialect, const Limits& limits) {
  const Dialect legacy = dialect == Dialect::Modern ? Dialect::Legacy113 : dialect;
  RequestDecoder decoder(limits, legacy);
  if (dialect == Dialect::Modern) {
    Request validate;
    const DecodeResult result = decoder.decode(fromHex(kValidateHex), validate);
    EXPECT_EQ(result.status, DecodeStatus::Complete) << result.error;
  }
  return decoder;
}

}  // namespace ddprun::proto::testing
