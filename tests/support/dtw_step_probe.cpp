// The probe runtime: linked into a program only through the probed solution
// code that calls record(), so its hooks are set exactly when probes exist.
#include "dtw_step_probe.h"

#include <mutex>
#include <set>
#include <string>

#include "dtw_test_steps.h"

namespace dtw::testing::probe {
namespace {

std::mutex& mutex() {
  static std::mutex mu;
  return mu;
}

std::set<std::string>& steps() {
  static std::set<std::string> recorded;
  return recorded;
}

void begin_test() {
  const std::lock_guard lock(mutex());
  steps().clear();
  epoch.fetch_add(1, std::memory_order_relaxed);
}

std::set<std::string> reached() {
  const std::lock_guard lock(mutex());
  return steps();
}

[[maybe_unused]] const bool kInstalled = [] {
  probe_hooks() = {&begin_test, &reached};
  return true;
}();

}  // namespace

std::atomic<unsigned> epoch{0};

void record(Site& site) {
  const std::lock_guard lock(mutex());
  steps().insert(site.step);
}

}  // namespace dtw::testing::probe
