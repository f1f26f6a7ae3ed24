// Running programs under Open MPI's mpirun in the tests (tests/dist/test_mpi_*.cpp).
#pragma once

#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "support/process.h"

namespace heed::test {

inline std::string mpirun() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"})
    if (std::filesystem::exists(std::string(dir) + "/mpirun")) return std::string(dir) + "/mpirun";
  FAIL("mpirun not found (apt-get install openmpi-bin)");
  return {};
}

/// `mpirun -np N PROGRAM`: as root in a container, more ranks than cores on a CI machine, and ranks
/// that yield the core while they wait (two ranks spinning on two busy cores slow everything down).
inline std::vector<std::string> mpirun_np(int np, const std::string& program) {
  return {mpirun(), "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1",
          "-np", std::to_string(np), program};
}

/// Options for running `cmd` for at most `seconds`. Under AddressSanitizer, leak checking is off in
/// MPI jobs: Open MPI 4.1.4 leaks at MPI_Finalize (in ompi_op_base_op_select, and in components it
/// unloads, whose frames LeakSanitizer cannot name). heed's side of them runs leak-checked in the
/// thread-rank tests (test_grad_reducer.cpp) and in the plain runs; other checks stay on.
inline RunOptions mpi_options(const std::vector<std::string>& cmd, double seconds) {
  RunOptions o;
  o.timeout_s = seconds;
  if (cmd[0] == mpirun()) {
    const char* asan = std::getenv("ASAN_OPTIONS");
    o.env.push_back(std::string("ASAN_OPTIONS=") + (asan && *asan ? std::string(asan) + ":" : "") + "detect_leaks=0");
  }
  return o;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The processes whose parent is `parent` (mpirun's ranks), from /proc.
inline std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  DIR* proc = ::opendir("/proc");
  if (!proc) return out;
  while (const dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t close = line.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(pid);
  }
  ::closedir(proc);
  return out;
}

/// Waits until process `pid` has exited (gone from /proc, or a zombie of one thread: its files,
/// and so its locks, are released) or `seconds` passed; whether it did. A SIGKILLed process is not
/// gone at once: a resume started right after killing the ranks once found rank 0 still holding
/// the run's lock. Nor is a zombie main thread enough: /proc/PID/stat says 'Z' as soon as the main
/// thread has exited, while the process's other threads (the two a rank gets from Open MPI) may
/// still be exiting, and the descriptors they share stay open until the last one has gone.
inline bool wait_exited(pid_t pid, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (seconds_since(t0) < seconds) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    bool zombie = false, gone = true;
    int threads = 0;
    while (std::getline(status, line)) {
      gone = false;
      if (line.rfind("State:", 0) == 0) zombie = line.find('Z') != std::string::npos;
      if (line.rfind("Threads:", 0) == 0) threads = std::atoi(line.c_str() + 8);
    }
    if (gone || (zombie && threads == 1)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

/// The shared-memory segments of Open MPI (/dev/shm/vader_segment.*) that process `pid` has
/// mapped: its own and its peers'. mpirun deletes them when the job ends, so never when it is
/// SIGKILLed (3 files of 4 MiB per killed job of 3 ranks stayed).
inline std::vector<std::string> shm_segments_of(pid_t pid) {
  std::vector<std::string> out;
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t at = line.find("/dev/shm/vader_segment.");
    if (at == std::string::npos) continue;
    const std::string path = line.substr(at, line.find(' ', at) - at);  // without " (deleted)"
    if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(path);
  }
  return out;
}

/// The rank mpirun gave process `pid` (OMPI_COMM_WORLD_RANK in its environment), or -1.
inline int rank_of(pid_t pid) {
  std::ifstream env("/proc/" + std::to_string(pid) + "/environ");
  std::string entry;
  while (std::getline(env, entry, '\0'))
    if (entry.rfind("OMPI_COMM_WORLD_RANK=", 0) == 0) return std::atoi(entry.c_str() + 21);
  return -1;
}

}  // namespace heed::test
