// `dtw bench kernels --device cuda` in a build without the CUDA toolkit.
#include "dtw/errors.h"
#include "kernels_report_cuda.h"

namespace dtw::bench {

int cuda_kernels_report(int /*repeats*/) {
  DTW_CHECK_ARG(false, "--device cuda: this build has no CUDA (configure where the CUDA toolkit is "
                       "installed; see the README's section on GPU machines)");
  return 0;
}

}  // namespace dtw::bench
