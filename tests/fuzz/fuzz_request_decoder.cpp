// libFuzzer target for RequestDecoder. Each input is a 4-byte control header
// and a client byte stream. The header picks the legacy dialect, the limits
// and a split point; the stream is decoded three times, as a connection could
// receive it: whole, in two parts, and one byte at a time. Any broken
// invariant traps, among them decoding work beyond a bound linear in the
// stream's size.
//
// Header: [0] bit 0: legacy dialect 2.1 instead of 1.13; bit 1: tiny limits.
//         [1] tiny limits only: max_request_bytes = 16 + this byte, so the
//             fuzzer can move the request limit onto any field boundary.
//         [2..3] big-endian split point, modulo the stream size + 1.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/proto/tcpstore_codec.hpp"

namespace {

using ddprun::proto::Command;
using ddprun::proto::DecodeResult;
using ddprun::proto::DecodeStatus;
using ddprun::proto::Dialect;
using ddprun::proto::Limits;
using ddprun::proto::Request;
using ddprun::proto::RequestDecoder;

constexpr std::size_t kHeaderBytes = 4;

// Small enough that the fuzzer reaches every limit with short inputs.
Limits tinyLimits(std::uint8_t request_byte) {
  return Limits{8, 16, 3, std::size_t{16} + request_byte};
}

void check(bool invariant) {
  if (!invariant) {
    __builtin_trap();
  }
}

// What one pass over a stream produced; the two passes must agree.
struct Outcome {
  std::vector<std::string> requests;  // each Complete request's bytes
  DecodeResult last;
  Dialect dialect = Dialect::Undecided;
  std::uint64_t calls = 0;  // decode() calls
};

// Decodes everything decodable in `buffer`, dropping consumed bytes. Returns
// false once the decoder says Bad (the connection would be closed).
bool drain(RequestDecoder& decoder, std::string& buffer, Outcome& outcome) {
  Request request;
  while (true) {
    const DecodeResult result = decoder.decode(buffer, request);
    ++outcome.calls;
    outcome.last = result;
    switch (result.status) {
      case DecodeStatus::Complete: {
        check(result.size >= 1 && result.size <= buffer.size());
        check(result.size <= decoder.limits().max_request_bytes);
        check(result.error.empty());
        std::string reencoded;
        encodeRequest(decoder.dialect(), request, reencoded);
        check(reencoded == std::string_view(buffer).substr(0, result.size));
        if (decoder.dialect() == Dialect::Modern && outcome.requests.empty()) {
          check(request.command == Command::Validate);
        }
        outcome.requests.emplace_back(buffer, 0, result.size);
        buffer.erase(0, result.size);
        break;
      }
      case DecodeStatus::NeedMore:
        check(result.size > buffer.size());
        check(result.size <= decoder.limits().max_request_bytes);
        check(result.error.empty());
        return true;
      case DecodeStatus::Bad:
        check(result.size == 0);
        check(!result.error.empty());
        return false;
    }
  }
}

// Feeds `stream[0, split)`, then the rest in pieces of `piece` bytes.
Outcome run(const Limits& limits, Dialect legacy, std::string_view stream, std::size_t split,
            std::size_t piece) {
  RequestDecoder decoder(limits, legacy);
  Outcome outcome;
  std::string buffer(stream.substr(0, split));
  bool open = drain(decoder, buffer, outcome);
  for (std::size_t at = split; open && at < stream.size(); at += piece) {
    buffer.append(stream.substr(at, piece));
    open = drain(decoder, buffer, outcome);
  }
  outcome.dialect = decoder.dialect();
  // Each call reads at most a few fields again (an incomplete item's
  // lengths), and a complete request's fields are read at most twice (once
  // more when it was resumed); a field is at least 4 bytes.
  check(decoder.fieldsRead() <= 4 * outcome.calls + stream.size());
  return outcome;
}

// The dialect follows from the first five bytes alone (docs/tcpstore-protocol.md §4.6).
Dialect expectedDialect(std::string_view stream, Dialect legacy) {
  if (stream.empty() || (stream[0] == 0 && stream.size() < 5)) {
    return Dialect::Undecided;
  }
  return stream.substr(0, 5) == std::string_view("\x00\xce\xf7\x85\x3c", 5) ? Dialect::Modern
                                                                            : legacy;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < kHeaderBytes) {
    return 0;
  }
  const Dialect legacy = (data[0] & 1) != 0 ? Dialect::Legacy21 : Dialect::Legacy113;
  const Limits limits = (data[0] & 2) != 0 ? tinyLimits(data[1]) : Limits{};
  const std::string_view stream(reinterpret_cast<const char*>(data) + kHeaderBytes,
                                size - kHeaderBytes);
  const std::size_t split = (std::size_t{data[2]} << 8 | data[3]) % (stream.size() + 1);

  const Outcome whole = run(limits, legacy, stream, stream.size(), stream.size());
  check(whole.dialect == expectedDialect(stream, legacy));
  // Decoding depends only on the bytes, never on how they were chunked.
  for (const Outcome& chunked :
       {run(limits, legacy, stream, split, stream.size()), run(limits, legacy, stream, 0, 1)}) {
    check(whole.requests == chunked.requests);
    check(whole.last.status == chunked.last.status);
    check(whole.last.size == chunked.last.size);
    check(whole.last.error == chunked.last.error);
    check(whole.dialect == chunked.dialect);
  }
  return 0;
}
