#pragma once
// Shared pieces of the collectives report (`dtw_bench_collectives`): the
// options, one measured series per algorithm or peer, and the α-β-γ model.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dtw/types.h"

namespace dtw::bench {

struct Options {
  int ranks = 2;
  std::vector<std::string> algos;       // dtw allreduce algorithms to run
  std::vector<std::int64_t> sizes;      // bytes per rank
  int iters = 0;                        // 0: chosen per size
  int warmup = -1;                      // -1: chosen per size
  int trials = 1;                       // repeat each size, keep the fastest trial
  bool peers = true;                    // Gloo, memcpy, ideal, MPI rows
  std::string backend = "threads";      // "mpi": also over MPI, in mpirun; "nccl": on the GPUs
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::string json_path, plot_path;
  std::string command_line;
};

// One measured point: the whole buffer of `bytes` per rank.
struct Sample {
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  double seconds = 0;        // per call, slowest rank, best trial
  std::int64_t wrong = -1;   // elements off the reference beyond tolerance; -1: not checked
  double model_seconds = -1; // α-β-γ prediction; < 0: no model
};

struct Series {
  std::string name;      // "ring", "gloo ring_chunked", "memcpy", ...
  std::string kind;      // "dtw", "peer", "bound"
  double bus_factor = 1; // busbw = algbw * bus_factor (nccl-tests)
  std::string note;      // why a row was skipped or what it measures
  std::vector<Sample> samples;
  bool failed = false;   // its run failed (a peer process died): the report exits non-zero
};

// --backend nccl: the GPUs, and reduce_into against a device copy on GPU 0.
struct GpuInfo {
  std::string name;  // cudaDeviceProp::name of GPU 0
  int count = 0;     // GPUs visible
  struct Bandwidth {
    std::int64_t bytes = 0;
    double reduce_gbps = 0, copy_gbps = 0;  // bytes moved: 3n and 2n
  };
  std::vector<Bandwidth> bandwidth;
};

// α (s), β (s/byte) from chapter 00's ping-pong, γ (s/byte) from reduce_into.
struct Model {
  double alpha = 0, beta = 0, gamma = 0;
  std::string source;  // how α and β were obtained
};

// Iterations and warm-up calls for one size (options override).
int iters_for(const Options& o, std::int64_t bytes);
int warmup_for(const Options& o, std::int64_t bytes);

// The Sample of size k from every rank's timings and error counts, laid out
// as the report's runners fill them: secs[(k·trials + t)·p + r] and
// wrong[k·p + r]. Time is the best trial of the slowest rank; #wrong sums the
// ranks. `element_size` turns bytes into a count; no model is set.
Sample sample_from_ranks(std::int64_t bytes, std::size_t element_size, std::size_t k,
                         std::size_t trials, int p, const std::vector<double>& secs,
                         const std::vector<std::int64_t>& wrong);

// Runs fn(rank) on `p` threads at once; rethrows the first exception.
void run_threads(int p, const std::function<void(int)>& fn);

// The input every rank starts from: small integers, so any summation order
// gives the same float; `timing` keeps values positive and away from
// denormals when the same buffer is reduced over and over.
double input_value(int rank, std::int64_t i, ReduceOp op, bool timing);
// Op over every rank's input_value, in rank order.
double expected_value(int p, std::int64_t i, ReduceOp op);
// Whether `got` matches `want` within the tolerance for this dtype and p.
bool close_enough(double got, double want, DataType type, int p);

// The model's allreduce time for a dtw algorithm, or < 0 when it has none.
double model_seconds(const std::string& algo, double bytes, int p, const Model& m);

Model fit_model(const Options& o);
std::vector<Series> run_dtw_algorithms(const Options& o, const Model& m);
std::vector<Series> run_peers(const Options& o);
// MPI_Allreduce's row, run under mpirun; with o.backend == "mpi" also every
// chosen algorithm over the mpi backend (rows named "ring (mpi)", ...).
std::vector<Series> run_mpi_peer(const Options& o, const char* self_exe);
// `--mpi-child`: the body mpirun starts; prints one line per size on rank 0.
int mpi_child_main(const Options& o);

// --backend nccl (nccl_report.cpp, only in builds with NCCL): every chosen
// algorithm and NCCL's own allreduce, one rank per GPU on device memory, in
// one table, then reduce_into against a device copy. Returns the exit code
// (1: no GPU). Without --ranks (`ranks_given` false) every GPU gets a rank.
int nccl_main(Options o, bool ranks_given);

/// Whose algorithms the dtw rows time, for the report's header: chapter 01's
/// solution or the learner's lab (code_solution.cpp, code_lab.cpp: one of the
/// two is linked into each program).
extern const char* const kRowsCode;

void print_report(const Options& o, const Model& m, const std::vector<Series>& all);
void print_nccl_report(const Options& o, const GpuInfo& gpu, const std::vector<Series>& all);
// `gpu`: the --backend nccl run's GPUs and device bandwidths (no model then).
void write_json(const Options& o, const Model& m, const std::vector<Series>& all,
                const GpuInfo* gpu = nullptr);
void write_plot(const Options& o, const std::vector<Series>& all);
// The data file write_plot writes beside the SVG at `plot_path`: its
// extension replaced by .dat (busbw.svg: busbw.dat; ./plots/busbw: ./plots/busbw.dat).
std::string plot_data_path(const std::string& plot_path);

}  // namespace dtw::bench
