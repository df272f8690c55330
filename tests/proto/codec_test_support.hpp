// Helpers shared by the codec suites: hex conversion, owned copies of decoded
// requests (a Request only borrows its input), whole-stream decoding and the
// golden request table taken from docs/tcpstore-protocol.md.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/proto/tcpstore_codec.hpp"
#include "ddprun/proto/tcpstore_wire.hpp"
#include "ddprun/test_support/hex.hpp"

namespace ddprun::proto {

// Readable gtest output for the codec's enums (found by argument-dependent lookup).
void PrintTo(DecodeStatus status, std::ostream* os);
void PrintTo(Command command, std::ostream* os);
void PrintTo(Dialect dialect, std::ostream* os);

}  // namespace ddprun::proto

namespace ddprun::proto::testing {

// fromHex("00 0300000000000000 2f6b31") takes the doc's annotated dumps verbatim.
using test_support::fromHex;
using test_support::toHex;

// A decoded request that owns its bytes, so it survives the input buffer.
struct OwnedRequest {
  Command command = Command::GetNumKeys;
  std::vector<std::string> keys;
  std::vector<std::string> values;
  std::int64_t number = 0;
  std::uint32_t word = 0;

  bool operator==(const OwnedRequest&) const = default;
};

OwnedRequest own(const Request& request);
// A Request viewing `owned`'s strings; valid while `owned` lives.
Request view(const OwnedRequest& owned);
std::string encode(Dialect dialect, const OwnedRequest& request);
void PrintTo(const OwnedRequest& request, std::ostream* os);

// Everything a decoder made of one byte stream.
struct StreamDecode {
  std::vector<OwnedRequest> requests;
  std::vector<std::size_t> sizes;  // bytes consumed per request
  std::size_t consumed = 0;
  DecodeResult last;  // the result that stopped decoding (NeedMore or Bad)
};

// Decodes `stream` from its start until a result is not Complete.
StreamDecode decodeStream(RequestDecoder& decoder, std::string_view stream);

// Feeds `stream` `chunk` bytes at a time into a connection-like buffer,
// dropping consumed bytes. Records a gtest failure wherever a NeedMore hint
// does not ask for more than is buffered or leaves the limit.
StreamDecode decodeInChunks(RequestDecoder& decoder, std::string_view stream, std::size_t chunk);
StreamDecode decodeByteByByte(RequestDecoder& decoder, std::string_view stream);

// One request with its exact bytes in one dialect.
struct GoldenCase {
  std::string name;  // gtest parameter name
  Dialect dialect;
  OwnedRequest request;
  std::string bytes;
};

void PrintTo(const GoldenCase& golden, std::ostream* os);

// Every command of every dialect, bytes from docs/tcpstore-protocol.md (verbatim
// where it gives them) or laid out from its §5 and §7 tables otherwise.
const std::vector<GoldenCase>& goldenCases();

// A request whose fields claim more than the default limits allow; decoding it
// must say Bad at once, without waiting for or allocating the claimed bytes.
struct HostileCase {
  std::string name;
  Dialect dialect;
  std::string bytes;
  std::string claimed;  // the claimed size as decimal text; the error must name it
};

void PrintTo(const HostileCase& hostile, std::ostream* os);

// Lengths and counts of 2^63, 2^64 - 1 and just over each default limit, in
// every field that carries one.
const std::vector<HostileCase>& hostileCases();

// The VALIDATE every 2.2+ connection starts with; decoders need it first.
inline constexpr std::string_view kValidateHex = "00 cef7853c";

// A decoder for `dialect` that has already consumed the connection preamble
// (VALIDATE for Modern; nothing for the legacy dialects).
RequestDecoder decoderAfterPreamble(Dialect dialect, const Limits& limits = {});

}  // namespace ddprun::proto::testing
