// The collectors a metrics endpoint asks at every scrape. Each collector
// reads what it owns (taking its own locks, or atomics) and adds families to
// the scrape's Exposition; nothing is stored between scrapes, so a value is
// always as of the scrape.
//
// Collectors are added before the endpoint serves; after that the registry is
// read only, and scrape() may run on any thread (the endpoint's).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ddprun/metrics/exposition.hpp"

namespace ddprun::metrics {

class Registry {
 public:
  using Collector = std::function<void(Exposition&)>;

  void add(Collector collector) { collectors_.push_back(std::move(collector)); }

  // Every collector's families, in the order the collectors were added.
  std::string scrape() const {
    Exposition exposition;
    for (const Collector& collect : collectors_) {
      collect(exposition);
    }
    return exposition.text();
  }

 private:
  std::vector<Collector> collectors_;
};

}  // namespace ddprun::metrics
