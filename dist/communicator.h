// heed::dist: the processes of a data-parallel run and the messages between them.
//
// A Communicator is what the gradient reduction, the shared evaluation and the checksums need
// from a message layer, and nothing more: point-to-point transfers of floats and an all-gather
// that complete in the background, and a way to end every process at once. Under mpirun, heed's
// MPI backend implements it (dist/runtime.h loads it); a plain run gets the one-process
// LocalCommunicator, and no MPI library is ever loaded.
//
// Every wait polls, and asks the stop check installed with set_stop_check() between polls: a
// rank whose peer died, or that mpirun is ending (Ctrl-C), gives up with dist::Stopped instead
// of blocking inside MPI until SIGKILL, and can still save the state its step started from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/check.h"

namespace heed::dist {

/// A transfer started by send(), recv() or start_all_gather(); spent once it is complete.
using Request = int;

/// Thrown by a wait (and the gradient reducer) when the stop check asked to stop.
class Stopped : public Error {
 public:
  using Error::Error;
};

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
  /// Starts gathering every rank's `bytes` bytes (the same count on every rank, < 2^31) into
  /// `out` (size() * bytes, in rank order). Every rank must start its all-gathers in one order.
  virtual Request start_all_gather(const void* data, size_t bytes, void* out) = 0;
  /// Moves transfers along; true once `r` is complete.
  virtual bool test(Request r) = 0;
  /// Ends every process of the run with `exit_code`, now (after this one printed its error).
  [[noreturn]] virtual void abort(int exit_code) = 0;

  /// Polls `r` until it is complete; throws Stopped if the stop check asks meanwhile.
  void wait(Request r);
  /// Every rank's `bytes` bytes, in rank order (start_all_gather, then wait).
  std::vector<char> all_gather(const void* data, size_t bytes);
  /// Installs the question every wait asks between polls (e.g. "did a stop signal arrive?");
  /// an empty function (the default) never stops.
  void set_stop_check(std::function<bool()> check) { stop_check_ = std::move(check); }
  /// Throws Stopped if the stop check says so.
  void check_stop() const;

  /// The largest tag send() and recv() accept (MPI promises at least this much).
  static constexpr int kMaxTag = 32767;

 private:
  std::function<bool()> stop_check_;
};

/// The world of a plain run: rank 0 of 1. An all-gather returns the data; send and recv throw
/// heed::Error (there is nobody to talk to); abort exits the process.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Request send(const float* data, int64_t n, int to, int tag) override;
  Request recv(float* data, int64_t n, int from, int tag) override;
  Request start_all_gather(const void* data, size_t bytes, void* out) override;
  bool test(Request r) override;
  [[noreturn]] void abort(int exit_code) override;
};

}  // namespace heed::dist
