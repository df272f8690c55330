#include "ddprun/worker/idx_reader.hpp"

#include <zlib.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "ddprun/proto/errors.hpp"

namespace ddprun::worker {
namespace {

// IDX magic: two zero bytes, the element type (0x08 = uint8), the rank.
constexpr uint32_t kUint8Labels = 0x00000801;
constexpr uint32_t kUint8Images = 0x00000803;
// Far above any MNIST-style file; guards allocation against a bogus header.
constexpr uint64_t kMaxElements = uint64_t{1} << 31;

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

class IdxFile {
 public:
  explicit IdxFile(std::string path) : path_(std::move(path)) {
    file_.reset(gzopen(path_.c_str(), "rb"));
    if (!file_) {
      throw ConfigError("dataset file " + path_ + ": cannot open (is dataset-fashion-mnist " +
                        "installed, or --data-dir right?)");
    }
  }

  uint32_t readBigEndian32() {
    std::array<unsigned char, 4> bytes{};
    readExactly(bytes.data(), bytes.size(), "header");
    return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) |
           uint32_t{bytes[3]};
  }

  void expectMagic(uint32_t expected, const char* what) {
    const uint32_t magic = readBigEndian32();
    if (magic != expected) {
      throw ConfigError("dataset file " + path_ + ": not an IDX " + what + " file (magic " +
                        std::to_string(magic) + ")");
    }
  }

  torch::Tensor readUint8(const std::vector<int64_t>& shape) {
    uint64_t count = 1;
    for (int64_t dim : shape) {
      count *= static_cast<uint64_t>(dim);
    }
    if (count == 0 || count > kMaxElements) {
      throw ConfigError("dataset file " + path_ + ": implausible size in header");
    }
    auto tensor = torch::empty(shape, torch::kUInt8);
    readExactly(tensor.data_ptr<uint8_t>(), count, "data");
    return tensor;
  }

 private:
  void readExactly(void* out, uint64_t size, const char* part) {
    auto* cursor = static_cast<unsigned char*>(out);
    while (size > 0) {
      const unsigned chunk = static_cast<unsigned>(std::min<uint64_t>(size, 1u << 30));
      const int got = gzread(file_.get(), cursor, chunk);
      if (got <= 0) {
        throw ConfigError("dataset file " + path_ + ": truncated or not gzip (reading " + part +
                          ")");
      }
      cursor += got;
      size -= static_cast<uint64_t>(got);
    }
  }

  std::string path_;
  GzFile file_;
};

}  // namespace

torch::Tensor readIdxImages(const std::string& path) {
  IdxFile file(path);
  file.expectMagic(kUint8Images, "image");
  const auto count = static_cast<int64_t>(file.readBigEndian32());
  const auto rows = static_cast<int64_t>(file.readBigEndian32());
  const auto cols = static_cast<int64_t>(file.readBigEndian32());
  return file.readUint8({count, rows * cols});
}

torch::Tensor readIdxLabels(const std::string& path) {
  IdxFile file(path);
  file.expectMagic(kUint8Labels, "label");
  const auto count = static_cast<int64_t>(file.readBigEndian32());
  return file.readUint8({count}).to(torch::kLong);
}

}  // namespace ddprun::worker
