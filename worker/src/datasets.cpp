#include "ddprun/worker/datasets.hpp"

#include "ddprun/proto/errors.hpp"
#include "ddprun/worker/idx_reader.hpp"

namespace ddprun::worker {
namespace {

Dataset syntheticRegression(int64_t samples, uint64_t seed) {
  // Seeded through the global generator, exactly as the Python peer does with
  // torch.manual_seed(seed); torch.rand(...), so both see the same numbers.
  torch::manual_seed(seed);
  auto inputs = torch::rand({samples, kMlpFeatures});
  auto targets = torch::rand({samples, 1});
  return {inputs, targets};
}

torch::Tensor pixelsToFloat(const torch::Tensor& pixels) {
  return pixels.to(torch::kFloat32).div_(255.0);
}

Dataset fashionMnist(const std::string& dir, const std::string& split, int64_t limit) {
  auto images = readIdxImages(dir + "/" + split + "-images-idx3-ubyte.gz");
  auto labels = readIdxLabels(dir + "/" + split + "-labels-idx1-ubyte.gz");
  if (images.size(0) != labels.size(0)) {
    throw ConfigError("dataset " + dir + ": " + split + " has " + std::to_string(images.size(0)) +
                      " images but " + std::to_string(labels.size(0)) + " labels");
  }
  if (limit > 0 && limit < images.size(0)) {
    images = images.narrow(0, 0, limit);
    labels = labels.narrow(0, 0, limit);
  }
  return {pixelsToFloat(images), labels.contiguous()};
}

}  // namespace

TaskData loadTaskData(const TrainOptions& options) {
  if (options.task == "mlp") {
    const int64_t samples = options.samples > 0 ? options.samples : kMlpDefaultSamples;
    return {syntheticRegression(samples, options.seed), std::nullopt};
  }
  auto train = fashionMnist(options.data_dir, "train", options.samples);
  if (options.task == "autoencoder") {
    train.targets = train.inputs;  // reconstruct the input
    return {train, std::nullopt};
  }
  return {train, fashionMnist(options.data_dir, "t10k", 0)};
}

}  // namespace ddprun::worker
