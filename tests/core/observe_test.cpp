// Observability: the traffic matrix and the Chrome trace a launch reports.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <unistd.h>
#include <vector>

#include "dtw/dtw.h"
#include "dtw_test.h"

namespace dtw {
namespace {

using testing::launch_bounded;

TEST(ObserveTest, TrafficMatrixCountsBytesAndMessages) {
  const Report report = launch_bounded(3, [](Comm& comm) {
    // Rank r sends (r+1)*10 floats to each other rank, twice.
    for (int rep = 0; rep < 2; ++rep) {
      for (int d = 1; d < comm.size(); ++d) {
        const int dst = (comm.rank() + d) % comm.size();
        const int src = (comm.rank() - d + comm.size()) % comm.size();
        std::vector<float> in(static_cast<std::size_t>(src + 1) * 10);
        comm.sendrecv(std::vector<float>(static_cast<std::size_t>(comm.rank() + 1) * 10), dst,
                      in, src, 0);
      }
    }
    comm.barrier();  // internal messages are not user traffic
    EXPECT_EQ(comm.traffic().bytes_sent_to(comm.rank()), 0);
    const int next = (comm.rank() + 1) % comm.size();
    EXPECT_EQ(comm.traffic().bytes_received_from(next), (next + 1) * 10 * 4 * 2);
    EXPECT_EQ(comm.traffic().messages_received_from(next), 2);
    EXPECT_EQ(comm.traffic().total_bytes_sent(), (comm.rank() + 1) * 10 * 4 * 2 * 2);
  });
  ASSERT_EQ(report.world_size, 3);
  EXPECT_EQ(report.backend, "threads");
  for (int s = 0; s < 3; ++s)
    for (int d = 0; d < 3; ++d) {
      EXPECT_EQ(report.traffic.bytes(s, d), s == d ? 0 : (s + 1) * 80) << s << "->" << d;
      EXPECT_EQ(report.traffic.messages(s, d), s == d ? 0 : 2) << s << "->" << d;
    }
  EXPECT_EQ(report.total_bytes(), 2 * 80 + 2 * 160 + 2 * 240);
  const std::string table = report.traffic_table();
  EXPECT_NE(table.find("src\\dst"), std::string::npos) << table;
  EXPECT_NE(table.find("240"), std::string::npos) << table;
}

TEST(ObserveTest, RecvReduceAndSelfTrafficAreCounted) {
  const Report report = launch_bounded(2, [](Comm& comm) {
    std::vector<double> acc(4, 1.0);
    if (comm.rank() == 0) comm.send(acc, 1, 0);
    else comm.recv_reduce(acc, 0, ReduceOp::kSum, 0);
    Request s = comm.isend(acc, comm.rank(), 1);
    std::vector<double> got(4);
    Request r = comm.irecv(got, comm.rank(), 1);
    comm.wait(r);
    comm.wait(s);
  });
  EXPECT_EQ(report.traffic.bytes(0, 1), 32);
  EXPECT_EQ(report.traffic.bytes(0, 0), 32);
  EXPECT_EQ(report.traffic.bytes(1, 1), 32);
  EXPECT_EQ(report.traffic.messages(1, 0), 0);
}

TEST(ObserveTest, TraceIsWrittenAsChromeJson) {
  LaunchOptions options;
  options.trace = true;
  options.timeout = std::chrono::seconds(20);
  const Report report = launch(2, options, [](Comm& comm) {
    auto phase = comm.tracer().phase("forward");
    std::vector<float> buf(256);
    if (comm.rank() == 0) comm.send(buf, 1, 4);
    else comm.recv(buf, 0, 4);
    comm.barrier();
  });
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("dtw_trace_test_" + std::to_string(::getpid()) + ".json");
  report.write_trace(path.string());
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::set<std::string> names;
  bool send_ok = false, recv_ok = false;
  for (const auto& e : trace["traceEvents"]) {
    names.insert(e["name"].get<std::string>());
    EXPECT_EQ(e["ph"], "X");
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    if (e["name"] == "send") {
      send_ok = e["tid"] == 0 && e["args"]["peer"] == 1 && e["args"]["bytes"] == 1024 &&
                e["args"]["tag"] == 4 && e["cat"] == "comm";
    }
    if (e["name"] == "recv") {
      recv_ok = e["tid"] == 1 && e["args"]["peer"] == 0 && e["args"]["bytes"] == 1024;
    }
    if (e["name"] == "forward") {
      EXPECT_EQ(e["cat"], "phase");
    }
  }
  EXPECT_TRUE(send_ok);
  EXPECT_TRUE(recv_ok);
  EXPECT_EQ(names.count("forward"), 1u);
  EXPECT_EQ(names.count("barrier"), 1u);
  // The phase encloses the calls made inside it.
  for (const TraceEvent& ev : report.trace) EXPECT_LE(ev.start_us, ev.end_us);
}

TEST(ObserveTest, WriteTraceWithoutTracingIsAnError) {
  const Report report = launch_bounded(1, [](Comm&) {});
  EXPECT_THROW(report.write_trace("unused.json"), InvalidArgument);
  EXPECT_TRUE(report.trace.empty());
}

}  // namespace
}  // namespace dtw
