// The registry of optional backends (backend_registry.h).
#include "backend_registry.h"

#include <deque>
#include <mutex>

namespace dtw::detail {
namespace {
struct Registry {
  std::mutex mutex;
  // A deque: find_backend hands out pointers that later registrations keep valid.
  std::deque<BackendEntry> entries;
};
// A function-local static: backends register from static initialisers of
// other libraries, whose order relative to this file's is unspecified.
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

bool register_backend(BackendEntry entry) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (BackendEntry& e : r.entries)
    if (e.name == entry.name) {
      e = std::move(entry);
      return true;
    }
  r.entries.push_back(std::move(entry));
  return true;
}

const BackendEntry* find_backend(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const BackendEntry& e : r.entries)
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<BackendEntry> registered_backends() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return {r.entries.begin(), r.entries.end()};
}

}  // namespace dtw::detail
