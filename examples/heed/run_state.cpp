#include "run_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "nn/dropout.h"

namespace heed::cli {

namespace fs = std::filesystem;

std::string model_path(const std::string& dir) { return (fs::path(dir) / "model.safetensors").string(); }
std::string state_path(const std::string& dir) { return (fs::path(dir) / "train_state.safetensors").string(); }
std::string log_path(const std::string& dir) { return (fs::path(dir) / "log.jsonl").string(); }

void prepare_out_dir(const std::string& dir) {
  if (dir.empty()) throw UsageError("--out: empty path");
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw UsageError("--out " + dir + ": exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec) throw UsageError("--out " + dir + ": cannot create directory (" + ec.message() + ")");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw UsageError("--out " + dir + ": directory is not writable (" + std::strerror(errno) + ")");
  // access() says yes to root everywhere, and knows nothing of read-only or special file systems:
  // creating a file is the real test, done now rather than at the first checkpoint.
  const std::string probe = (fs::path(dir) / (".heed-write-test." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw UsageError("--out " + dir + ": cannot create files in it (" + std::strerror(errno) + ")");
  ::close(fd);
  ::unlink(probe.c_str());
}

void remove_stale_temp_files(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (const std::string base : {"model.safetensors.tmp.", "train_state.safetensors.tmp.", "loss.svg.tmp.",
                                  "log.jsonl.tmp."}) {
      if (name.rfind(base, 0) != 0) continue;
      const std::string pid_text = name.substr(base.size());
      if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
      const long pid = std::strtol(pid_text.c_str(), nullptr, 10);
      // A live process may be saving right now (a second heed in the same directory); leave it.
      if (pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) == 0) continue;
      std::error_code rm_ec;
      fs::remove(entry.path(), rm_ec);
    }
  }
}

void append_line(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  HEED_CHECK(fd >= 0, path, ": cannot open for appending (", std::strerror(errno), ")");
  const std::string text = line + "\n";
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  HEED_CHECK(n == static_cast<ssize_t>(text.size()) && synced, path, ": write failed (",
             std::strerror(n < 0 ? err : ENOSPC), ")");
}

void truncate_log(const std::string& path, int64_t iter) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("iter") && j["iter"].is_number_integer() && j["iter"].get<int64_t>() < iter)
      kept += line + "\n";
  }
  in.close();
  write_text_file(path, kept);
}

void write_text_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  HEED_CHECK(f, path, ": cannot write (", std::strerror(errno), ")");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
                  ::fsync(::fileno(f)) == 0;
  const int err = errno;
  std::fclose(f);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    detail::fail(path, ": write failed (", std::strerror(ok ? errno : err), ")");
  }
}

static void collect_dropouts(nn::Module& m, const std::string& prefix,
                             std::vector<std::pair<std::string, Generator*>>& out) {
  if (auto* d = dynamic_cast<nn::Dropout*>(&m)) out.emplace_back(prefix.empty() ? "." : prefix, &d->generator());
  for (auto& [name, child] : m.children())
    collect_dropouts(*child, prefix.empty() ? name : prefix + "." + name, out);
}

std::vector<std::pair<std::string, Generator*>> dropout_generators(nn::Module& model) {
  std::vector<std::pair<std::string, Generator*>> out;
  collect_dropouts(model, "", out);
  return out;
}

std::string encode_generator(const Generator& g) {
  nlohmann::json j = nlohmann::json::array();
  for (uint64_t w : g.state()) j.push_back(std::to_string(w));
  return j.dump();
}

void decode_generator(Generator& g, const std::string& text, const std::string& what) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  HEED_CHECK(j.is_array() && j.size() == 4, what, ": random state must be an array of 4 integers");
  Generator::State s;
  for (size_t i = 0; i < 4; ++i) {
    HEED_CHECK(j[i].is_string(), what, ": random state entries must be decimal strings");
    try {
      size_t used = 0;
      s[i] = std::stoull(j[i].get<std::string>(), &used);
      HEED_CHECK(used == j[i].get<std::string>().size(), what, ": bad random state entry");
    } catch (const std::logic_error&) {
      detail::fail(what, ": bad random state entry ", j[i].dump());
    }
  }
  g.set_state(s);
}

volatile std::sig_atomic_t g_stop_signal = 0;

static void on_stop_signal(int sig) { g_stop_signal = sig; }

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a signal must not make a write to stdout or a checkpoint fail with EINTR
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace heed::cli
