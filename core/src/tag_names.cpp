#include "dtw/tag_names.h"

#include <map>
#include <mutex>
#include <vector>

namespace dtw {
namespace {

struct Names {
  std::mutex mu;
  std::map<int, std::vector<std::string>> by_tag;
};

Names& names() {
  static Names n;
  return n;
}

}  // namespace

bool name_tag(int tag, std::string_view name) {
  Names& n = names();
  const std::lock_guard lock(n.mu);
  std::vector<std::string>& list = n.by_tag[tag];
  for (const std::string& existing : list)
    if (existing == name) return true;
  list.emplace_back(name);
  return true;
}

std::string tag_name(int tag) {
  Names& n = names();
  const std::lock_guard lock(n.mu);
  const auto it = n.by_tag.find(tag);
  if (it == n.by_tag.end()) return {};
  std::string out;
  for (const std::string& name : it->second) out += (out.empty() ? "" : " or ") + name;
  return out;
}

}  // namespace dtw
