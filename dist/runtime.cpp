#include "dist/runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/check.h"

namespace heed::dist {

namespace fs = std::filesystem;

bool launched_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

std::vector<int> stop_signals() {
  std::vector<int> out{SIGINT, SIGTERM};
  if (launched_by_mpirun()) out.push_back(SIGCONT);
  return out;
}

// Where the backend may be, in order. HEED_DIST_BACKEND_DIRS (set by CMake) lists the build and
// install directories, separated by ':'.
static std::vector<fs::path> backend_candidates() {
  std::vector<fs::path> out;
  if (const char* path = std::getenv("HEED_MPI_BACKEND"); path && *path) out.emplace_back(path);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back(exe.parent_path() / kBackendFile);
    out.push_back(exe.parent_path().parent_path() / "lib" / kBackendFile);
  }
#ifdef HEED_DIST_BACKEND_DIRS
  const std::string dirs = HEED_DIST_BACKEND_DIRS;
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    if (end > start) out.push_back(fs::path(dirs.substr(start, end - start)) / kBackendFile);
    start = end + 1;
  }
#endif
  return out;
}

Runtime::Runtime() {
  if (!launched_by_mpirun()) {
    world_ = std::make_unique<LocalCommunicator>();
    return;
  }
  std::string tried, why;
  for (const fs::path& candidate : backend_candidates()) {
    tried += (tried.empty() ? "" : ", ") + candidate.string();
    std::error_code ec;
    if (!fs::is_regular_file(candidate, ec)) continue;
    // RTLD_GLOBAL: Open MPI opens its own components with dlopen, and they need libmpi's
    // symbols visible to everyone.
    void* lib = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
      why = ::dlerror();
      continue;
    }
    auto open = reinterpret_cast<OpenBackendFn>(::dlsym(lib, kOpenBackendSymbol));
    HEED_CHECK(open, candidate.string(), ": not heed's MPI backend (no ", kOpenBackendSymbol, ")");
    char error[512] = "";
    world_.reset(open(error, sizeof error));
    HEED_CHECK(world_, "could not join the MPI job: ", error);
    backend_path_ = candidate.string();
    return;  // the library stays loaded: MPI must not be unloaded
  }
  detail::fail("started by mpirun, but heed's MPI backend (", kBackendFile, ") could not be loaded",
               why.empty() ? std::string() : " (" + why + ")", "; looked in: ", tried,
               "; set HEED_MPI_BACKEND to its path");
}

Runtime::~Runtime() { world_.reset(); }

}  // namespace heed::dist
