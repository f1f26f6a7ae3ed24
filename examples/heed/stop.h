// Stopping on SIGINT, SIGTERM and SIGHUP. The handlers only record the signal; every long phase of every
// command polls it (training steps, evaluation batches, each generated character, decoding steps,
// file chunks), so a stop is honoured within one unit of work: training saves a checkpoint first,
// then the command exits 128+N. A second signal ends the process at once (exit 128+N, nothing
// more saved; the last complete checkpoint stays, as every file is written atomically); the same
// signal again within half a second is the first request delivered twice (GNU timeout sends it to
// its child and to its process group), not a second one. Under
// mpirun, SIGCONT is a stop signal too (Ctrl-C to mpirun reaches the ranks as SIGCONT, then SIGTERM),
// and later signals are ignored: mpirun's SIGKILL follows anyway.
#pragma once

#include <atomic>
#include <csignal>
#include <exception>
#include <string>
#include <vector>

namespace heed::cli {

/// The signal that asked heed to stop (0: none yet). An atomic, not a volatile sig_atomic_t: the
/// handler may run on any of heed's threads, and a second signal's handler reads it with the time
/// of the first (stop.cpp), which must be stored before it.
extern std::atomic<int> g_stop_signal;

/// Installs the stop handlers (dist::stop_signals(), and SIGHUP: a closed terminal stops a run like Ctrl-C: it is saved) (main does, before any command runs) and ignores SIGPIPE,
/// so a closed pipe is a write error heed reports (io.h) rather than a silent death mid-save.
void install_stop_handlers();

/// Thrown by check_stop() once a stop signal arrived; main turns it into exit code 128 + signal.
struct Stopped : std::exception {
  int signal;
  explicit Stopped(int sig) : signal(sig) {}
  const char* what() const noexcept override { return "stopped by a signal"; }
};

/// Throws Stopped if a stop signal arrived.
inline void check_stop() {
  if (g_stop_signal) throw Stopped(g_stop_signal);
}

/// While one is alive, a stop signal ends the process at once (stderr says so, exit 128+N) instead
/// of waiting for the next check_stop(). For phases that only read and have nothing to save
/// (loading a checkpoint), whose long work happens inside the library (parsing, copying and
/// converting the tensors of a large file), which knows nothing of signals and never polls them.
/// Nothing may be written while one is alive. A signal that came before it is honoured at once.
class ExitAtOnceOnStop {
 public:
  ExitAtOnceOnStop();
  ~ExitAtOnceOnStop();
  ExitAtOnceOnStop(const ExitAtOnceOnStop&) = delete;
  ExitAtOnceOnStop& operator=(const ExitAtOnceOnStop&) = delete;
};

/// What a stop that ends the process at once (an ExitAtOnceOnStop phase) removes first, so that a
/// run directory it had only just made is left as it was found: `lock_file` unless one of
/// `run_files` exists, then `dirs` in order (deepest first) until one is not empty. Set by
/// RunDirectory while it holds its lock; cleared (an empty lock_file) when it lets go. Paths are
/// copied into static storage: the handler may only call unlink, rmdir and access.
void set_exit_at_once_cleanup(const std::string& lock_file, const std::vector<std::string>& run_files,
                              const std::vector<std::string>& dirs);

}  // namespace heed::cli
