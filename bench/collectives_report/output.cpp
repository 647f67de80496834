// What the report prints and writes: the nccl-tests-style tables, a summary
// against the bounds and peers (or, for --backend nccl, one table against
// NCCL), the JSON record and the busbw plot.
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "dtw/errors.h"
#include "dtw/output_file.h"
#include "process.h"
#include "report.h"

namespace dtw::bench {
namespace {

double algbw(const Sample& s) { return s.seconds > 0 ? s.bytes / s.seconds / 1e9 : 0; }
double busbw(const Series& r, const Sample& s) { return algbw(s) * r.bus_factor; }

std::string type_name(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "float";
    case DataType::kFloat64: return "double";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kByte: break;
  }
  return "byte";
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string human_bytes(std::int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (u < 3 && b >= 1024 && b % 1024 == 0) b /= 1024, ++u;
  return std::to_string(b) + " " + units[u];
}

// busbw's factor 2(p-1)/p is 0 on one rank: say why the column reads 0.
constexpr const char* kOneRankNote =
    "# note: on 1 rank an allreduce moves no data between ranks, so busbw = algbw x 2(p-1)/p\n"
    "#       is 0 by definition; the times measure the call's local work and overhead only\n";

const Series* find(const std::vector<Series>& all, const std::string& name) {
  for (const auto& s : all)
    if (s.name == name && !s.samples.empty()) return &s;
  return nullptr;
}

// The summary the targets are read from: every dtw row at the
// largest size against the ideal row and the best Gloo row, and at the smallest.
void print_summary(const std::vector<Series>& all) {
  const Series* ideal = find(all, "ideal");
  std::printf("\n# summary\n");
  for (const auto& s : all) {
    if (s.kind != "dtw" || s.samples.empty()) continue;
    const Sample& big = s.samples.back();
    std::printf("#   %-14s at %s: busbw %.2f GB/s", s.name.c_str(), human_bytes(big.bytes).c_str(),
                busbw(s, big));
    if (ideal && busbw(*ideal, ideal->samples.back()) > 0)
      std::printf(", %.0f%% of ideal (%.2f)", 100 * busbw(s, big) / busbw(*ideal, ideal->samples.back()),
                           busbw(*ideal, ideal->samples.back()));
    double best = 0;
    std::string best_name;
    for (const auto& g : all)
      if (g.name.rfind("gloo", 0) == 0 && !g.samples.empty() && busbw(g, g.samples.back()) > best)
        best = busbw(g, g.samples.back()), best_name = g.name;
    if (best > 0) std::printf(", %.1fx best Gloo (%s %.2f)", busbw(s, big) / best, best_name.c_str(), best);
    const Sample& small = s.samples.front();
    std::printf("; %s: %.2f us\n", human_bytes(small.bytes).c_str(), small.seconds * 1e6);
  }
}

// --backend mpi: each algorithm over MPI against MPI_Allreduce (ratio of
// times: above 1 is slower than MPI) and against itself on threads.
void print_mpi_comparison(const std::vector<Series>& all) {
  const Series* mpi = find(all, "mpi allreduce");
  if (!mpi) return;
  std::printf("\n# over MPI: time(us) of each algorithm, and x = its time / MPI_Allreduce's; threads = on the threads backend\n");
  std::printf("# %10s %14s", "size", "MPI_Allreduce");
  std::vector<std::pair<const Series*, const Series*>> rows;  // (mpi, threads)
  for (const auto& s : all) {
    if (!s.name.ends_with(" (mpi)") || s.samples.empty()) continue;
    const std::string base = s.name.substr(0, s.name.size() - 6);
    rows.emplace_back(&s, find(all, base + " (threads)"));
    std::printf(" %14s %6s %10s", base.c_str(), "x", "threads");
  }
  std::printf("\n");
  for (std::size_t k = 0; k < mpi->samples.size(); ++k) {
    const Sample& ref = mpi->samples[k];
    std::printf("  %10s %14.1f", human_bytes(ref.bytes).c_str(), ref.seconds * 1e6);
    for (const auto& [s, t] : rows) {
      const Sample& x = s->samples[k];
      std::printf(" %14.1f %6.2f", x.seconds * 1e6, x.seconds / ref.seconds);
      if (t && k < t->samples.size()) std::printf(" %10.1f", t->samples[k].seconds * 1e6);
      else std::printf(" %10s", "-");
    }
    std::printf("\n");
  }
}

}  // namespace

void print_report(const Options& o, const Model& m, const std::vector<Series>& all) {
  std::printf("# dtw_bench_collectives: allreduce on %d ranks (%s), %s %s\n", o.ranks,
              o.backend == "mpi" ? "threads and mpi backends" : "threads backend",
              type_name(o.dtype).c_str(), std::string(name_of(o.op)).c_str());
  std::printf("# %s, %u hardware threads; %s\n", cpu_model().c_str(), std::thread::hardware_concurrency(),
              utc_now().c_str());
  std::printf("# code: %s\n", kRowsCode);
  std::printf("# model: alpha = %.2f us, beta = %.4f ns/B (%.1f GB/s), gamma = %.4f ns/B (%.1f GB/s)\n",
              m.alpha * 1e6, m.beta * 1e9, 1e-9 / m.beta, m.gamma * 1e9, 1e-9 / m.gamma);
  std::printf("#        (%s; gamma from reduce_into on 16 MiB)\n", m.source.c_str());
  std::printf("# time: slowest rank, mean over the iterations, best of %d trial(s); GB = 1e9 bytes\n", o.trials);
  if (o.ranks == 1) std::printf("%s", kOneRankNote);
  for (const auto& s : all) {
    std::printf("\n# %-22s [%s] busbw = algbw x %.3f%s%s\n", s.name.c_str(), s.kind.c_str(), s.bus_factor,
                s.note.empty() ? "" : "  -- ", s.note.c_str());
    if (s.samples.empty()) continue;
    std::printf("# %12s %12s %7s %6s %12s %12s %12s %8s %12s\n", "size", "count", "type", "redop",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "model(us)");
    for (const auto& x : s.samples) {
      std::printf("  %12lld %12lld %7s %6s %12.3f %12.3f %12.3f", static_cast<long long>(x.bytes),
                  static_cast<long long>(x.count), type_name(o.dtype).c_str(),
                  std::string(name_of(o.op)).c_str(), x.seconds * 1e6, algbw(x), busbw(s, x));
      if (x.wrong >= 0) std::printf(" %8lld", static_cast<long long>(x.wrong));
      else std::printf(" %8s", "n/a");
      if (x.model_seconds >= 0) std::printf(" %12.2f\n", x.model_seconds * 1e6);
      else std::printf(" %12s\n", "-");
    }
  }
  print_summary(all);
  print_mpi_comparison(all);
  std::fflush(stdout);
}

// --backend nccl: one table, a row per (size, algorithm) with NCCL's row
// first, and each row's time against NCCL's; then the device bandwidths.
void print_nccl_report(const Options& o, const GpuInfo& gpu, const std::vector<Series>& all) {
  const std::string type = type_name(o.dtype), op(name_of(o.op));
  std::printf("# dtw_bench_collectives: allreduce on %d GPUs (nccl backend: one rank per GPU, device memory), %s %s\n",
              o.ranks, type.c_str(), op.c_str());
  std::printf("# %d x %s visible; %s\n", gpu.count, gpu.name.c_str(), utc_now().c_str());
  std::printf("# code: %s\n", kRowsCode);
  std::printf("# time: slowest rank, mean over the iterations, best of %d trial(s); GB = 1e9 bytes; "
              "busbw = algbw x 2(p-1)/p\n", o.trials);
  std::printf("# x NCCL = time / NCCL's time at that size (above 1: slower); #wrong: elements off the exact result\n");
  if (o.ranks == 1) std::printf("%s", kOneRankNote);
  for (const auto& s : all)
    if (s.samples.empty()) std::printf("# %s: %s\n", s.name.c_str(), s.note.c_str());
  const Series* nccl = find(all, "NCCL");
  std::printf("\n# %12s %12s %7s %6s %-14s %12s %12s %12s %8s %8s\n", "size", "count", "type", "redop", "algorithm",
              "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "x NCCL");
  for (std::size_t k = 0; k < o.sizes.size(); ++k) {
    if (k > 0) std::printf("\n");
    for (const auto& s : all) {
      if (k >= s.samples.size()) continue;
      const Sample& x = s.samples[k];
      std::printf("  %12lld %12lld %7s %6s %-14s %12.3f %12.3f %12.3f", static_cast<long long>(x.bytes),
                  static_cast<long long>(x.count), type.c_str(), op.c_str(), s.name.c_str(), x.seconds * 1e6,
                  algbw(x), busbw(s, x));
      if (x.wrong >= 0) std::printf(" %8lld", static_cast<long long>(x.wrong));
      else std::printf(" %8s", "n/a");
      if (nccl && k < nccl->samples.size()) std::printf(" %8.2f\n", x.seconds / nccl->samples[k].seconds);
      else std::printf(" %8s\n", "-");
    }
  }
  std::printf("\n# reduce_into on GPU 0 against a device-to-device cudaMemcpy of the same bytes\n");
  std::printf("# (bandwidth counts bytes moved: 3n for the reduction, 2n for the copy)\n");
  std::printf("# %12s %14s %14s %12s\n", "size", "reduce(GB/s)", "copy(GB/s)", "reduce/copy");
  for (const auto& b : gpu.bandwidth)
    std::printf("  %12lld %14.1f %14.1f %11.1f%%\n", static_cast<long long>(b.bytes), b.reduce_gbps, b.copy_gbps,
                100 * b.reduce_gbps / b.copy_gbps);
  if (nccl) {
    std::printf("\n# summary at %s: NCCL busbw %.2f GB/s\n", human_bytes(nccl->samples.back().bytes).c_str(),
                busbw(*nccl, nccl->samples.back()));
    for (const auto& s : all) {
      if (s.kind != "dtw" || s.samples.empty()) continue;
      const Sample& big = s.samples.back();
      std::printf("#   %-14s busbw %.2f GB/s, %.2fx NCCL's time\n", s.name.c_str(), busbw(s, big),
                  big.seconds / nccl->samples.back().seconds);
    }
  }
  std::fflush(stdout);
}

void write_json(const Options& o, const Model& m, const std::vector<Series>& all, const GpuInfo* gpu) {
  nlohmann::json j;
  j["command"] = o.command_line;
  j["date"] = utc_now();
  j["machine"] = {{"cpu", cpu_model()}, {"hardware_threads", std::thread::hardware_concurrency()}};
  j["collective"] = "allreduce";
  j["backend"] = o.backend;
  j["ranks"] = o.ranks;
  j["dtype"] = type_name(o.dtype);
  j["op"] = std::string(name_of(o.op));
  j["trials"] = o.trials;
  if (o.ranks == 1) j["note"] = "1 rank: busbw is 0 by definition (factor 2(p-1)/p)";
  if (gpu) {
    // The α-β-γ model is fitted on the threads backend: it says nothing about GPUs.
    j["machine"]["gpu"] = {{"name", gpu->name}, {"count", gpu->count}};
    j["model"] = nullptr;
    j["device_bandwidth"] = nlohmann::json::array();
    for (const auto& b : gpu->bandwidth)
      j["device_bandwidth"].push_back(
          {{"bytes", b.bytes}, {"reduce_into_GBps", b.reduce_gbps}, {"device_copy_GBps", b.copy_gbps}});
  } else {
    j["model"] = {{"alpha_s", m.alpha}, {"beta_s_per_byte", m.beta}, {"gamma_s_per_byte", m.gamma},
                  {"source", m.source}};
  }
  for (const auto& s : all) {
    nlohmann::json js = {{"name", s.name}, {"kind", s.kind}, {"bus_factor", s.bus_factor},
                         {"note", s.note}, {"failed", s.failed}};
    js["samples"] = nlohmann::json::array();
    for (const auto& x : s.samples) {
      js["samples"].push_back({{"bytes", x.bytes}, {"count", x.count}, {"time_us", x.seconds * 1e6},
                               {"algbw_GBps", algbw(x)}, {"busbw_GBps", busbw(s, x)},
                               {"wrong", x.wrong},
                               {"model_us", x.model_seconds >= 0 ? nlohmann::json(x.model_seconds * 1e6)
                                                                 : nlohmann::json(nullptr)}});
    }
    j["series"].push_back(js);
  }
  write_file(o.json_path, j.dump(2) + "\n", "--json");
  std::printf("# wrote %s\n", o.json_path.c_str());
}

std::string plot_data_path(const std::string& plot_path) {
  // The extension of the file name only: a dot in a folder's name ("./x",
  // "runs.v2/x") is not one.
  return std::filesystem::path(plot_path).replace_extension(".dat").string();
}

void write_plot(const Options& o, const std::vector<Series>& all) {
  // The data next to the picture: one block per series, its name first.
  const std::string dat = plot_data_path(o.plot_path);
  std::ostringstream out;
  int blocks = 0;
  for (const auto& s : all) {
    if (s.samples.empty()) continue;
    out << "\"" << s.name << "\" \"busbw\"\n";
    for (const auto& x : s.samples) out << x.bytes << " " << busbw(s, x) << "\n";
    out << "\n\n";
    ++blocks;
  }
  write_file(dat, out.str(), "--plot");
  const std::string title = std::to_string(o.ranks) + " ranks, " + type_name(o.dtype) + " " +
                            std::string(name_of(o.op));
  // gnuplot runs like every child process (process.h): no shell, so paths
  // with quotes or spaces are safe, and how it ended is decoded.
  const cli::ProcessResult plot = cli::run_process(
      {"gnuplot", "-e",
       "datafile='" + dat + "'; outfile='" + o.plot_path + "'; nseries=" + std::to_string(blocks) +
           "; plottitle='" + title + "'",
       DTW_PLOT_SCRIPT},
      {.output = cli::Output::kCapture});
  if (plot.exit_code == 127 && plot.output.find("cannot run gnuplot") != std::string::npos) {
    std::printf("# gnuplot not found: wrote the data to %s, no plot (apt-get install gnuplot-nox)\n",
                dat.c_str());
    return;
  }
  DTW_CHECK(plot.ok(), Error, "--plot: gnuplot " << plot.describe() << ": " << plot.failure_lines());
  std::printf("# wrote %s (data: %s)\n", o.plot_path.c_str(), dat.c_str());
}

}  // namespace dtw::bench
