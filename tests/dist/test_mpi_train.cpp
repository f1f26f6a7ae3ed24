// Failures injected into a data-parallel run under mpirun (Open MPI), with the heed_dist_train
// driver, which can fail on purpose: an error on one rank ends every rank at once, naming it, and
// parameters that differ across ranks stop the run. `heed train` itself under mpirun (the bits of
// one process, Ctrl-C, a killed rank, --resume with another N) is tested in test_mpi_heed.cpp.
#include "mpirun.h"
#include "support/process.h"

using namespace heed::test;

namespace {

std::string driver() { return std::string(HEED_BINARY_DIR) + "/heed_dist_train"; }

// The driver under mpirun, N ranks.
std::vector<std::string> mpirun_np(int np) { return heed::test::mpirun_np(np, driver()); }

ProcessResult run_for(const std::vector<std::string>& cmd, double seconds) {
  return run_process(cmd, mpi_options(cmd, seconds));
}

}  // namespace

TEST_CASE("an error on one rank ends every rank at once, naming the rank", "[dist][mpi]") {
  const ProcessResult r =
      run_for(cat(mpirun_np(3), {"--steps", "1000", "--fail-rank", "2", "--fail-step", "1"}), 120);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.err, Catch::Contains("heed: error: rank 2 of 3: rank 2 failed on purpose at step 1"));
  REQUIRE_THAT(r.out, !Catch::Contains("step 2 loss"));
}

TEST_CASE("parameters that differ across ranks stop the run, naming the tensor and the rank", "[dist][mpi]") {
  const ProcessResult r = run_for(cat(mpirun_np(2), {"--steps", "3", "--corrupt-rank", "1"}), 120);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.err, Catch::Contains("the processes' parameters differ: 'transformer.wpe.weight' on rank 1 is not "
                                      "rank 0's"));
}

