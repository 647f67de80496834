#pragma once
/// @file
/// `dtw::process_comm`: a communicator over the processes of a multi-process job.

#include <memory>
#include <string>

#include "dtw/comm.h"

namespace dtw {

/// A communicator over every process of the job that ran a launch on
/// `backend` (the `Report::backend` of that launch), for code around launches
/// that shares per-process values with `dtw::allgather_results`: on "mpi" a
/// new communicator over every process `mpirun` started (collective: every
/// process must call it), as `dtw::mpi::process_comm` makes. nullptr for a
/// backend whose ranks all live in this process ("threads", "nccl" without
/// mpirun) or that this program does not link. Host memory, no ledger.
std::unique_ptr<Comm> process_comm(const std::string& backend);

}  // namespace dtw
