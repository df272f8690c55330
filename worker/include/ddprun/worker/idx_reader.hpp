// Reads the IDX files MNIST-style datasets ship as (big-endian header, then
// raw uint8 data), gzip-compressed as Debian's dataset-fashion-mnist has them.
#pragma once

#include <torch/torch.h>

#include <string>

namespace ddprun::worker {

// An IDX file of uint8 images, N x rows x cols, as a uint8 tensor [N, rows*cols].
// Throws ConfigError naming the file if it is missing, not IDX, or truncated.
torch::Tensor readIdxImages(const std::string& path);

// An IDX file of uint8 labels, as an int64 tensor [N].
torch::Tensor readIdxLabels(const std::string& path);

}  // namespace ddprun::worker
