// The modeled fabric's named clusters: datasheet numbers and their sources.
#include "dtw/train/fabric.h"

#include <string>
#include <string_view>
#include <vector>

#include "dtw/errors.h"

namespace dtw::train {

const std::vector<Cluster>& gpu_clusters() {
  // A100 80GB: 312 TFLOP/s dense BF16 and 2039 GB/s HBM2e (NVIDIA A100
  // datasheet); we assume 60% and 80% of peak sustained. Links: NCCL-level α
  // and the bus bandwidth nccl-tests reaches, not the wire's peak.
  constexpr double kFlops = 0.6 * 312e12, kMemory = 0.8 * 2039e9;
  static const std::vector<Cluster> all = {
      {"pcie-8", "8 A100 PCIe GPUs in one server, no NVLink",
       "A100 datasheet; PCIe 4.0 x16 = 31.5 GB/s per direction (PCI-SIG), ~24 GB/s reached "
       "through the host bridge; alpha 5 us",
       8, {5e-6, 1 / 24e9}, {5e-6, 1 / 24e9}, kFlops, kMemory, false},
      {"nvlink-8", "one DGX A100: 8 GPUs on NVLink 3 / NVSwitch",
       "A100 datasheet: NVLink 600 GB/s per GPU (300 GB/s each way); nccl-tests reach ~230 GB/s "
       "bus bandwidth on a DGX A100; alpha 3 us",
       8, {3e-6, 1 / 230e9}, {3e-6, 1 / 230e9}, kFlops, kMemory, false},
      {"ib-2x8", "2 DGX A100 nodes on HDR InfiniBand (one 200 Gb/s NIC per GPU)",
       "DGX A100 architecture: 8 ConnectX-6 HDR 200 Gb/s = 25 GB/s per GPU each way, ~22 GB/s "
       "reached; alpha 8 us between nodes; NVLink inside (as nvlink-8)",
       8, {3e-6, 1 / 230e9}, {8e-6, 1 / 22e9}, kFlops, kMemory, false},
      {"ib-4x8", "4 DGX A100 nodes on HDR InfiniBand",
       "as ib-2x8, with 4 nodes", 8, {3e-6, 1 / 230e9}, {8e-6, 1 / 22e9}, kFlops, kMemory, false},
      // Not a machine: what a schedule costs by itself, the assumption of the
      // bubble formulas (chapter 05), next to which the others show what the
      // messages add.
      {"ideal-8", "8 A100s whose messages cost nothing (a schedule by itself)",
       "A100 datasheet, as nvlink-8; alpha = beta = 0", 8, {0, 0}, {0, 0}, kFlops, kMemory, false},
  };
  return all;
}

Cluster this_machine(double alpha, double beta, double memory_bw) {
  DTW_CHECK_ARG(alpha >= 0 && beta >= 0 && memory_bw > 0,
                "this_machine: alpha " << alpha << ", beta " << beta << ", memory_bw "
                                       << memory_bw << " must be >= 0, >= 0, > 0");
  return {"this-machine", "this machine: measured compute, links fitted by ping-pong",
          "chapter 00's ping-pong and fit_alpha_beta, run now", 1 << 30,
          {alpha, beta}, {alpha, beta}, 0, memory_bw, true, false};
}

const Cluster& find_gpu_cluster(std::string_view name) {
  std::string known;
  for (const Cluster& c : gpu_clusters()) {
    if (c.name == name) return c;
    known += c.name + ", ";
  }
  DTW_CHECK_ARG(false, "unknown fabric '" << name << "'; known: " << known << "this-machine");
  return gpu_clusters().front();
}

}  // namespace dtw::train
