// heed::dist: joining the processes of a run, once, near the top of main.
//
//   int main(int argc, char** argv) {
//     heed::dist::Runtime runtime;                     // MPI_Init only under mpirun
//     heed::dist::Communicator& world = runtime.world();
//     try { ... } catch (const heed::Error& e) {
//       std::fprintf(stderr, "heed: error: %s\n", e.what());
//       if (runtime.distributed()) world.abort(1);     // never leave the other ranks waiting
//       return 1;
//     }
//   }                                                  // MPI_Finalize on the way out
//
// Why a backend loaded at run time: linking Open MPI into heed costs every plain run the loading
// of libmpi and its dependencies (measured in docs/scaling.md), and would make every program
// that links the heed library link MPI too. So the one part of heed that calls MPI is a plugin,
// libheed_dist_mpi.so, opened with dlopen only when mpirun started the process.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace heed::dist {

/// Whether Open MPI's mpirun started this process (it sets OMPI_COMM_WORLD_SIZE in every rank).
bool launched_by_mpirun();

/// The signals that ask a run to stop (save once, then exit): SIGINT and SIGTERM, and under
/// mpirun SIGCONT too. mpirun does not pass Ctrl-C (SIGINT) on: the ranks get SIGCONT at once,
/// SIGTERM odls_base_sigkill_timeout seconds later (Open MPI's MCA parameter, default 1) and
/// SIGKILL as long again after that (docs/scaling.md). A job stopped with Ctrl-Z and resumed
/// also gets SIGCONT, which stops the run too: it can be continued with --resume.
std::vector<int> stop_signals();

/// The processes of this run, from construction to destruction.
class Runtime {
 public:
  /// Under mpirun: loads the MPI backend and joins the job (MPI_Init). Otherwise a one-process
  /// world that loads no MPI library. The backend is looked for in $HEED_MPI_BACKEND (a file
  /// path), next to the executable, in ../lib beside it, then where heed was built and installed;
  /// throws heed::Error naming every place tried when it is in none of them.
  Runtime();
  /// Leaves the job (MPI_Finalize), which every rank must do before it exits normally: mpirun
  /// takes a rank that exits without it for a failed one and ends the whole job.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  Communicator& world() { return *world_; }
  /// Whether more than one process shares the run.
  bool distributed() const { return world_->size() > 1; }
  /// The MPI backend's file (empty in a one-process run).
  const std::string& backend_path() const { return backend_path_; }

 private:
  std::unique_ptr<Communicator> world_;
  std::string backend_path_;
};

/// The symbol the MPI backend exports: joins the job and returns its communicator (owned by the
/// caller), or null with a message in `error` (a buffer of `error_size` bytes).
using OpenBackendFn = Communicator* (*)(char* error, size_t error_size);
inline constexpr const char* kOpenBackendSymbol = "heed_dist_mpi_open";
inline constexpr const char* kBackendFile = "libheed_dist_mpi.so";

}  // namespace heed::dist
