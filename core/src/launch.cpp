// launch(): picks the backend and turns a collecting launch into a throwing one.
#include "dtw/launch.h"

#include "dtw/errors.h"
#include "launch_backends.h"

namespace dtw {

Report launch_collecting(int world_size, const LaunchOptions& options, const RankFunction& fn) {
  DTW_CHECK_ARG(world_size >= 1, "launch: world size " << world_size << " must be at least 1");
  DTW_CHECK_ARG(options.timeout.count() > 0,
                "launch: timeout " << options.timeout.count() << " ms must be positive");
  if (options.backend == "threads") return threads::launch(world_size, options, fn, nullptr);
  DTW_CHECK_ARG(false, "launch: unknown backend '" << options.backend
                                                   << "' (this build has: threads)");
  return {};
}

Report launch(int world_size, const LaunchOptions& options, const RankFunction& fn) {
  DTW_CHECK_ARG(world_size >= 1, "launch: world size " << world_size << " must be at least 1");
  if (options.backend == "threads") {
    std::exception_ptr first;
    Report report = threads::launch(world_size, options, fn, &first);
    if (first) std::rethrow_exception(first);
    return report;
  }
  return launch_collecting(world_size, options, fn);
}

Report launch(int world_size, const RankFunction& fn) { return launch(world_size, {}, fn); }

}  // namespace dtw
