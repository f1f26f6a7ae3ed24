// heed::dist: the processes of a data-parallel run and the messages between them.
//
// A Communicator is what the gradient reduction, the shared evaluation and the checksums need
// from a message layer, and nothing more: point-to-point transfers of floats that complete in the
// background, a small all-gather, and a way to end every process at once. Under mpirun, heed's
// MPI backend implements it (dist/runtime.h loads it); a plain run gets the one-process
// LocalCommunicator, and no MPI library is ever loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace heed::dist {

/// A transfer started by send() or recv(); spent once test() returned true or wait() returned.
using Request = int;

class Communicator {
 public:
  virtual ~Communicator() = default;
  /// This process's index in [0, size()). Rank 0 writes the log and the checkpoints.
  virtual int rank() const = 0;
  /// How many processes share the run.
  virtual int size() const = 0;
  /// Starts sending n floats (n < 2^31) to rank `to`; `data` must stay unchanged until the
  /// request completes. Two messages from one rank to another with the same tag (0..kMaxTag)
  /// arrive in the order they were sent.
  virtual Request send(const float* data, int64_t n, int to, int tag) = 0;
  /// Starts receiving n floats from rank `from` into `data`.
  virtual Request recv(float* data, int64_t n, int from, int tag) = 0;
  /// Moves transfers along; true once `r` is complete.
  virtual bool test(Request r) = 0;
  /// Blocks until `r` is complete.
  virtual void wait(Request r) = 0;
  /// Every rank's `bytes` bytes (the same count on every rank), in rank order. Blocks until every
  /// rank has called it.
  virtual std::vector<char> all_gather(const void* data, size_t bytes) = 0;
  /// Ends every process of the run with `exit_code`, now (after this one printed its error).
  [[noreturn]] virtual void abort(int exit_code) = 0;

  /// The largest tag send() and recv() accept (MPI promises at least this much).
  static constexpr int kMaxTag = 32767;
};

/// Whether `flag` is set on any rank (one all-gather of a byte; every rank must call it): lets
/// every rank stop after the same step when a stop signal reached only some of them, or reached
/// them at different moments.
bool any_rank(Communicator& comm, bool flag);

/// The world of a plain run: rank 0 of 1. all_gather returns the data; send and recv throw
/// heed::Error (there is nobody to talk to); abort exits the process.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Request send(const float* data, int64_t n, int to, int tag) override;
  Request recv(float* data, int64_t n, int from, int tag) override;
  bool test(Request r) override;
  void wait(Request r) override;
  std::vector<char> all_gather(const void* data, size_t bytes) override;
  [[noreturn]] void abort(int exit_code) override;
};

}  // namespace heed::dist
