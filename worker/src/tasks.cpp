#include "ddprun/worker/tasks.hpp"

#include "ddprun/proto/errors.hpp"

namespace ddprun::worker {
namespace {

namespace nn = torch::nn;

constexpr int64_t kImagePixels = 28 * 28;
constexpr double kMomentum = 0.9;

torch::Tensor meanSquaredError(const torch::Tensor& output, const torch::Tensor& target) {
  return torch::mse_loss(output, target);
}

torch::Tensor crossEntropy(const torch::Tensor& output, const torch::Tensor& target) {
  return torch::nn::functional::cross_entropy(output, target);
}

Task mlp(double lr) {
  nn::Sequential model(nn::Linear(20, 64), nn::ReLU(), nn::Linear(64, 1));
  auto optimizer = std::make_unique<torch::optim::SGD>(
      model->parameters(), torch::optim::SGDOptions(lr).momentum(kMomentum));
  return {"mlp", model, std::move(optimizer), meanSquaredError, false};
}

Task fmnist(double lr) {
  nn::Sequential model(nn::Linear(kImagePixels, 128), nn::ReLU(), nn::Linear(128, 10));
  auto optimizer =
      std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(lr));
  return {"fmnist", model, std::move(optimizer), crossEntropy, true};
}

Task autoencoder(double lr) {
  nn::Sequential model(nn::Linear(kImagePixels, 128), nn::ReLU(), nn::Linear(128, 128), nn::ReLU(),
                       nn::Linear(128, 128), nn::ReLU(), nn::Linear(128, kImagePixels));
  auto optimizer =
      std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(lr));
  return {"autoencoder", model, std::move(optimizer), meanSquaredError, false};
}

// LibTorch's C++ Linear draws its initial weights differently from Python's
// nn.Linear (same distribution, other draws). Redrawing them here from the
// seed, layer by layer as nn.Linear.reset_parameters() does (kaiming_uniform
// with a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), then the bias),
// makes train start from the very weights a Python script seeded alike does.
void initialiseLikePython(nn::Sequential& model, uint64_t seed) {
  torch::manual_seed(seed);
  torch::NoGradGuard no_grad;
  for (const auto& module : model->modules(/*include_self=*/false)) {
    if (auto* linear = module->as<nn::Linear>()) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(linear->weight.size(1)));
      linear->weight.uniform_(-bound, bound);
      linear->bias.uniform_(-bound, bound);
    }
  }
}

Task withPythonInit(Task task, uint64_t seed) {
  initialiseLikePython(task.model, seed);
  return task;
}

}  // namespace

Task makeTask(const std::string& name, std::optional<double> lr, uint64_t seed) {
  if (name == "mlp") {
    return withPythonInit(mlp(lr.value_or(0.01)), seed);
  }
  if (name == "fmnist") {
    return withPythonInit(fmnist(lr.value_or(0.001)), seed);
  }
  if (name == "autoencoder") {
    return withPythonInit(autoencoder(lr.value_or(0.001)), seed);
  }
  throw ConfigError("unknown task '" + name + "' (mlp, fmnist or autoencoder)");
}

double accuracy(torch::nn::Sequential& model, const Dataset& data, torch::Device device) {
  torch::NoGradGuard no_grad;
  const auto predicted = model->forward(data.inputs.to(device)).argmax(1);
  return predicted.eq(data.targets.to(device)).to(torch::kFloat64).mean().item<double>();
}

}  // namespace ddprun::worker
