#include "dtw/demo.h"

namespace dtw {
namespace {
std::vector<Demo>& registry() {
  static std::vector<Demo> all;
  return all;
}
}  // namespace

const std::vector<Demo>& demos() { return registry(); }

bool register_demo(Demo demo) {
  registry().push_back(std::move(demo));
  return true;
}

}  // namespace dtw
