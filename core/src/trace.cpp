#include "dtw/trace.h"

#include <nlohmann/json.hpp>

#include "dtw/errors.h"
#include "dtw/output_file.h"

namespace dtw {

void Tracer::comm_event(const char* op, int peer, std::int64_t bytes, int tag, double start_us,
                        bool is_send, int channel, double start_work) {
  if (!enabled_) return;
  TraceEvent e{op, "comm", rank_, peer, bytes, tag, start_us, now_us()};
  e.is_send = is_send;
  e.channel = channel;
  e.work_start = start_work;
  e.work_end = work();
  events_.push_back(std::move(e));
}

Tracer::Phase::Phase(Tracer& tracer, std::string name, const PhaseMeta& meta)
    : tracer_(tracer),
      name_(std::move(name)),
      meta_(meta),
      start_us_(tracer.enabled() ? tracer.now_us() : 0),
      start_work_(tracer.enabled() ? tracer.work() : -1) {}

Tracer::Phase::~Phase() {
  if (!tracer_.enabled()) return;
  TraceEvent e{name_, meta_.compute ? "compute" : "phase", tracer_.rank_, -1,
               static_cast<std::int64_t>(meta_.bytes), 0, start_us_, tracer_.now_us()};
  e.stage = meta_.stage;
  e.micro_batch = meta_.micro_batch;
  e.flops = meta_.flops;
  e.work_start = start_work_;
  e.work_end = tracer_.work();
  tracer_.events_.push_back(std::move(e));
}

void write_chrome_trace(const std::vector<TraceEvent>& events, const std::string& path) {
  // Complete events ("ph": "X"): one process, one thread (track) per rank.
  nlohmann::json trace_events = nlohmann::json::array();
  for (const TraceEvent& e : events) {
    nlohmann::json args = {{"bytes", e.bytes}};
    if (e.peer >= 0) args["peer"] = e.peer;
    if (e.category == "comm") {
      args["tag"] = e.tag;
      args["direction"] = e.is_send ? "send" : "recv";
      if (e.channel >= 0) args["collective_channel"] = e.channel;
    }
    if (e.stage >= 0) args["stage"] = e.stage;
    if (e.micro_batch >= 0) args["micro_batch"] = e.micro_batch;
    if (e.flops > 0) args["flops"] = e.flops;
    trace_events.push_back({{"name", e.name},
                            {"cat", e.category},
                            {"ph", "X"},
                            {"pid", 0},
                            {"tid", e.rank},
                            {"ts", e.start_us},
                            {"dur", e.end_us - e.start_us},
                            {"args", args}});
  }
  write_file(path, nlohmann::json{{"traceEvents", trace_events}, {"displayTimeUnit", "ns"}}.dump(1) + '\n',
             "the trace");
}

}  // namespace dtw
