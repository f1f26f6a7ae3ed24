// heed's MPI backend: the Communicator of dist/communicator.h over Open MPI, built as the plugin
// libheed_dist_mpi.so, which dist::Runtime opens only when mpirun started the process. It is the
// only code of heed that calls MPI, and it uses nothing of heed but that header.
//
// Errors: MPI's default handler (MPI_ERRORS_ARE_FATAL) ends the whole job on any failed call;
// mpirun ends every rank when one dies. Nothing here blocks: every call starts or tests a
// transfer, and dist::Communicator::wait polls (so a stop request can end a wait).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "dist/communicator.h"
#include "dist/runtime.h"

namespace {

using heed::dist::Request;

class MpiCommunicator final : public heed::dist::Communicator {
 public:
  MpiCommunicator() {
    // Only the thread that called MPI_Init calls MPI (heed's worker threads never do).
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiCommunicator() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Request send(const float* data, int64_t n, int to, int tag) override {
    const Request id = transfer_request(n, to, tag);
    MPI_Isend(data, static_cast<int>(n), MPI_FLOAT, to, tag, MPI_COMM_WORLD, &requests_[id]);
    return id;
  }
  Request recv(float* data, int64_t n, int from, int tag) override {
    const Request id = transfer_request(n, from, tag);
    MPI_Irecv(data, static_cast<int>(n), MPI_FLOAT, from, tag, MPI_COMM_WORLD, &requests_[id]);
    return id;
  }
  bool test(Request r) override {
    int done = 0;
    MPI_Test(&at(r), &done, MPI_STATUS_IGNORE);
    if (done) release(r);
    return done != 0;
  }
  Request start_all_gather(const void* data, size_t bytes, void* out) override {
    if (bytes > static_cast<size_t>(INT32_MAX)) fatal("an all-gather of more than 2^31 bytes");
    const Request id = new_request();
    MPI_Iallgather(data, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD,
                   &requests_[id]);
    return id;
  }
  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; this is for the compiler
  }

 private:
  // A programming error of the caller (the reducer bounds its messages): end the job loudly.
  [[noreturn]] void fatal(const char* what) {
    std::fprintf(stderr, "heed: error: MPI backend, rank %d: %s\n", rank_, what);
    abort(70);
  }
  Request transfer_request(int64_t n, int peer, int tag) {
    if (n < 0 || n > INT32_MAX) fatal("a message of more than 2^31 floats");
    if (peer < 0 || peer >= size_ || peer == rank_) fatal("a message to a rank that is not a peer");
    if (tag < 0 || tag > kMaxTag) fatal("a message tag outside [0, 32767]");
    return new_request();
  }
  Request new_request() {
    if (free_.empty()) {
      requests_.push_back(MPI_REQUEST_NULL);
      free_.push_back(static_cast<Request>(requests_.size() - 1));
    }
    const Request id = free_.back();
    free_.pop_back();
    return id;
  }
  MPI_Request& at(Request r) {
    if (r < 0 || static_cast<size_t>(r) >= requests_.size()) fatal("an unknown request");
    return requests_[r];
  }
  void release(Request r) {
    requests_[r] = MPI_REQUEST_NULL;
    free_.push_back(r);
  }

  int rank_ = 0, size_ = 1;
  // Requests are indices into this table. An MPI_Request is a handle (a value MPI does not
  // point back to), so the table may grow while transfers are in flight.
  std::vector<MPI_Request> requests_;
  std::vector<Request> free_;
};

}  // namespace

extern "C" __attribute__((visibility("default"))) heed::dist::Communicator* heed_dist_mpi_open(char* error,
                                                                                                size_t error_size) {
  try {
    return new MpiCommunicator();
  } catch (const std::exception& e) {
    std::snprintf(error, error_size, "%s", e.what());
    return nullptr;
  }
}
