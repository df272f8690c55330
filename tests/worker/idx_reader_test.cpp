// The IDX reader on small gzip files written here, and on Debian's
// Fashion-MNIST when dataset-fashion-mnist is installed.
#include "ddprun/worker/idx_reader.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>

#include "ddprun/proto/errors.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::worker {
namespace {

void writeGzip(const std::filesystem::path& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(file);
}

std::string bigEndian(uint32_t value) {
  return {static_cast<char>(value >> 24), static_cast<char>(value >> 16),
          static_cast<char>(value >> 8), static_cast<char>(value)};
}

std::string errorOf(const std::function<void()>& read) {
  try {
    read();
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "<no error>";
}

TEST(IdxReaderTest, ReadsImagesAndLabels) {
  test_support::TempDir dir;
  writeGzip(dir / "images.gz",
            bigEndian(0x803) + bigEndian(2) + bigEndian(2) + bigEndian(3) +
                std::string("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\xff", 12));
  writeGzip(dir / "labels.gz", bigEndian(0x801) + bigEndian(2) + std::string("\x07\x03", 2));
  const auto images = readIdxImages((dir / "images.gz").string());
  EXPECT_EQ(images.sizes(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(images[1][5].item<uint8_t>(), 255);
  const auto labels = readIdxLabels((dir / "labels.gz").string());
  EXPECT_EQ(labels.scalar_type(), torch::kLong);
  EXPECT_EQ(labels[0].item<int64_t>(), 7);
}

TEST(IdxReaderTest, BadFilesAreNamedInOneLine) {
  test_support::TempDir dir;
  writeGzip(dir / "labels-as-images.gz", bigEndian(0x801) + bigEndian(1) + "x");
  writeGzip(dir / "short.gz", bigEndian(0x803) + bigEndian(10) + bigEndian(28) + bigEndian(28));
  const auto missing = (dir / "absent.gz").string();
  for (const auto& [path, words] : std::vector<std::pair<std::string, std::string>>{
           {(dir / "labels-as-images.gz").string(), "not an IDX image file"},
           {(dir / "short.gz").string(), "truncated"},
           {missing, "cannot open"}}) {
    const std::string error = errorOf([&] { readIdxImages(path); });
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find(words), std::string::npos) << error;
  }
}

TEST(IdxReaderTest, ReadsDebiansFashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir + "/t10k-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const auto images = readIdxImages(dir + "/t10k-images-idx3-ubyte.gz");
  const auto labels = readIdxLabels(dir + "/t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(images.sizes(), (std::vector<int64_t>{10000, 784}));
  EXPECT_EQ(labels.size(0), 10000);
  EXPECT_EQ(labels.max().item<int64_t>(), 9);
  EXPECT_EQ(labels.min().item<int64_t>(), 0);
}

}  // namespace
}  // namespace ddprun::worker
