#include "run_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "io.h"
#include "seq2seq_state.h"
#include "stop.h"
#include "svg.h"

namespace heed::cli {

namespace fs = std::filesystem;

std::string model_path(const std::string& dir) { return (fs::path(dir) / "model.safetensors").string(); }
std::string state_path(const std::string& dir) { return (fs::path(dir) / "train_state.safetensors").string(); }
std::string log_path(const std::string& dir) { return (fs::path(dir) / "log.jsonl").string(); }
std::string config_path(const std::string& dir) { return (fs::path(dir) / "config.toml").string(); }
std::string plot_path(const std::string& dir) { return (fs::path(dir) / "loss.svg").string(); }
std::string best_model_path(const std::string& dir) { return (fs::path(dir) / "best.safetensors").string(); }

std::vector<std::string> run_files(const std::string& dir) {
  return {model_path(dir),  state_path(dir),      log_path(dir),         config_path(dir),
          plot_path(dir),   best_model_path(dir), seq2seq_state_path(dir)};
}

std::string describe(RunKind kind) {
  switch (kind) {
    case RunKind::gpt: return "a GPT run (heed train)";
    case RunKind::seq2seq: return "a seq2seq run (heed seq2seq)";
    case RunKind::unknown: return "the files of a run";
    case RunKind::none: break;
  }
  return "no run";
}

namespace {

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec));
}

// A safetensors file's JSON header, read alone (a discarded value if it cannot be read or parsed).
nlohmann::json safetensors_header(const std::string& path) {
  try {
    const std::string head = read_input_prefix(path, 8);
    if (head.size() < 8) return nlohmann::json::value_t::discarded;
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(head[i]);
    if (n > (100u << 20)) return nlohmann::json::value_t::discarded;
    return nlohmann::json::parse(read_input_prefix(path, 8 + n).substr(8), nullptr, false);
  } catch (const Error&) {
  }
  return nlohmann::json::value_t::discarded;
}

// The kind a checkpoint's header names in its metadata (unknown if unreadable or none).
RunKind header_kind(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("__metadata__") || !j["__metadata__"].is_object()) return RunKind::unknown;
  if (j["__metadata__"].contains("seq2seq")) return RunKind::seq2seq;
  if (j["__metadata__"].contains("config")) return RunKind::gpt;
  return RunKind::unknown;
}

// The kind model.safetensors's metadata names, from its header alone (unknown if unreadable).
RunKind model_kind(const std::string& path) { return header_kind(safetensors_header(path)); }

// A log's first line as JSON (a discarded value if it cannot be read or parsed; null if empty).
nlohmann::json first_log_line(const std::string& path) {
  try {
    const std::string head = read_input_prefix(path, 4096);
    if (head.empty()) return nullptr;
    return nlohmann::json::parse(head.substr(0, head.find('\n')), nullptr, false);
  } catch (const Error&) {
  }
  return nlohmann::json::value_t::discarded;
}

// A log's kind from its first line: seq2seq logs exact match.
RunKind log_kind(const std::string& path) {
  const nlohmann::json j = first_log_line(path);
  if (j.is_object()) return j.contains("exact_match") ? RunKind::seq2seq : RunKind::gpt;
  return RunKind::unknown;
}

// The first bytes of a file ("" if it cannot be read).
std::string file_prefix(const std::string& path, size_t bytes) {
  try {
    return read_input_prefix(path, bytes);
  } catch (const Error&) {
  }
  return {};
}

// The first file at one of a run's paths in `dir` that was evidently not written by heed ("" if
// none): a loss.svg without heed's signature, a model.safetensors or best.safetensors whose header
// parses but names no heed model, a config.toml without heed's first line, a log.jsonl whose first
// line is not an object with "iter". heed would replace such a file (or remove it with
// --overwrite), so it is refused instead. A file that cannot be read or parsed is not foreign:
// heed writes atomically, so that is rather a damaged file of heed's, which --overwrite may remove.
// Next to heed's own training state or model, a config.toml or log.jsonl is that run's, edited or
// not (checkpoint-format.md: config.toml may be hand-edited).
std::string foreign_file(const std::string& dir) {
  auto starts_with = [](const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; };
  const std::string svg = file_prefix(plot_path(dir), 64);
  if (!svg.empty() && !starts_with(svg, kSvgSignature)) return plot_path(dir);
  for (const std::string& model : {model_path(dir), best_model_path(dir)}) {
    const nlohmann::json j = safetensors_header(model);  // discarded if missing
    if (j.is_object() && header_kind(j) == RunKind::unknown) return model;
  }
  if (exists(state_path(dir)) || exists(seq2seq_state_path(dir)) || model_kind(model_path(dir)) != RunKind::unknown)
    return {};
  const std::string config = file_prefix(config_path(dir), 256);
  if (!config.empty() && !starts_with(config, std::string("# ") + kRunConfigTitle)) return config_path(dir);
  const nlohmann::json log = first_log_line(log_path(dir));  // discarded if missing, null if empty
  if (!log.is_null() && !log.is_discarded() && !(log.is_object() && log.contains("iter"))) return log_path(dir);
  return {};
}

// The temporary files (`<run file>.tmp.<pid>`) a killed run left; those of live processes stay.
void remove_stale_temp_files(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (const std::string& file : run_files(dir)) {
      const std::string base = fs::path(file).filename().string() + ".tmp.";
      if (name.rfind(base, 0) != 0) continue;
      const std::string pid_text = name.substr(base.size());
      if (pid_text.empty() || pid_text.size() > 9 || pid_text.find_first_not_of("0123456789") != std::string::npos)
        continue;
      const long pid = std::stol(pid_text);
      // A live process may be writing right now (`heed plot --out DIR/loss.svg`); leave it.
      if (pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) == 0) continue;
      std::error_code rm_ec;
      fs::remove(entry.path(), rm_ec);
    }
  }
}

// A refused heed removes the directories it made (RunDirectory::release), perhaps while another
// is between creating them and opening its lock there: that one finds a directory missing
// (ENOENT) and makes it again, this many times at most.
constexpr int kMaxDirectoryRetries = 100;

// Adds `more` to the directories this process made, keeping them deepest first (they all lie on
// one path, so the longer name is the deeper one).
void add_created(std::vector<std::string>& created, const std::vector<std::string>& more) {
  for (const std::string& d : more)
    if (std::find(created.begin(), created.end(), d) == created.end()) created.push_back(d);
  std::sort(created.begin(), created.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

// Creates `dir` and adds the directories it had to create to `created`. Returns false if a
// directory vanished on the way (ENOENT: try again).
bool prepare_out_dir(const std::string& dir, std::vector<std::string>& created) {
  if (dir.empty()) throw UsageError("--out: empty path");
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw UsageError("--out " + dir + ": exists and is not a directory");
  std::vector<std::string> missing;
  for (fs::path p = fs::absolute(dir, ec).lexically_normal(); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    if (p.has_filename()) missing.push_back(p.string());
    if (p == p.parent_path()) break;
  }
  fs::create_directories(dir, ec);
  add_created(created, missing);
  if (ec == std::errc::no_such_file_or_directory) return false;
  if (ec) throw UsageError("--out " + dir + ": cannot create directory (" + ec.message() + ")");
  // access() says yes to root everywhere and knows nothing of read-only or special file systems:
  // creating a file is the real test, done now rather than at the first checkpoint.
  const std::string probe = (fs::path(dir) / (".heed-write-test." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  const int open_error = errno;
  if (fd < 0 && open_error == ENOENT && !fs::exists(dir, ec)) return false;  // it went (not /proc's ENOENT)
  if (fd < 0) throw UsageError("--out " + dir + ": cannot create files in it (" + std::strerror(open_error) + ")");
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

}  // namespace

RunKind run_kind(const std::string& dir) {
  if (exists(seq2seq_state_path(dir))) return RunKind::seq2seq;
  if (exists(state_path(dir))) return RunKind::gpt;
  if (exists(model_path(dir))) return model_kind(model_path(dir));
  if (exists(config_path(dir))) return RunKind::gpt;  // only train writes config.toml
  if (exists(log_path(dir))) return log_kind(log_path(dir));
  if (exists(plot_path(dir))) return RunKind::unknown;
  return RunKind::none;
}

RunDirectory::RunDirectory(const std::string& dir, RunKind kind, OutMode mode, const std::string& command)
    : dir_(dir) {
  lock_file_ = (fs::path(dir) / ".heed.lock").string();
  const std::string& lock_file = lock_file_;
  int lock_error = 0;  // flock's errno, 0 once the lock is ours
  for (int attempt = 0;; ++attempt) {
    HEED_CHECK(attempt < kMaxDirectoryRetries, "--out ", dir, ": its directory or lock keeps disappearing");
    if (!prepare_out_dir(dir, created_dirs_)) continue;
    // O_NOFOLLOW: a symlink planted as the lock must not make heed write its note into the link's
    // target; and only a regular file is a lock (a FIFO or a device would block or be written).
    created_lock_ = ::access(lock_file.c_str(), F_OK) != 0;
    lock_fd_ = ::open(lock_file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    const int open_error = errno;
    std::error_code ec;
    if (lock_fd_ < 0 && open_error == ENOENT && !fs::exists(dir, ec)) continue;  // the directory went: make it again
    HEED_CHECK(lock_fd_ >= 0, lock_file, ": cannot open the run directory's lock (",
               open_error == ELOOP ? std::string("it is a symbolic link; remove it") : std::string(std::strerror(open_error)),
               ")");
    struct stat lock_st {};
    if (::fstat(lock_fd_, &lock_st) != 0 || !S_ISREG(lock_st.st_mode)) {
      ::close(lock_fd_);
      lock_fd_ = -1;
      detail::fail(lock_file, ": the run directory's lock is not a regular file; remove it");
    }
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {  // held by another: refused below
      lock_error = errno;
      break;
    }
    // A refused run removes the lock file it made (release()); one that opened that file just
    // before may then hold a lock on a file no longer in the directory. Only the file at the
    // path counts: take that one.
    struct stat at_path {};
    if (::stat(lock_file.c_str(), &at_path) == 0 && at_path.st_ino == lock_st.st_ino && at_path.st_dev == lock_st.st_dev)
      break;
    ::close(lock_fd_);
    lock_fd_ = -1;
  }
  if (lock_error != 0) {
    const int err = lock_error;
    char holder[512] = {0};
    const ssize_t n = ::pread(lock_fd_, holder, sizeof holder - 1, 0);
    std::string who = n > 0 ? std::string(holder, static_cast<size_t>(n)) : std::string();
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err == EWOULDBLOCK)
      detail::fail("--out ", dir, " is in use by another heed (", who.empty() ? "a process starting up" : who,
                   "); wait for it to finish, or choose another --out");
    detail::fail(lock_file, ": cannot lock (", std::strerror(err), ")");
  }
  // Name the holder, for whoever is refused next.
  char started[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  const std::string me = "pid " + std::to_string(::getpid()) + ", " + command + ", started " + started + "\n";
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, me.data(), me.size(), 0) < 0) {
    // The lock holds without its note; a refused writer then says "a process starting up".
  }

  try {
    apply_mode(kind, mode, command);
  } catch (...) {
    release();
    throw;
  }
  // A stop in a read-only phase ends heed at once, without destructors: it removes these itself.
  // (Directories made here imply a lock file made here.)
  if (created_lock_) set_exit_at_once_cleanup(lock_file_, run_files(dir_), created_dirs_);
}

void RunDirectory::apply_mode(RunKind kind, OutMode mode, const std::string& command) {
  const std::string& dir = dir_;
  const std::string out = "--out " + dir;
  if (const std::string file = foreign_file(dir); !file.empty())
    throw UsageError(out + ": " + file + " was not written by heed, and " + command +
                     " writes its own there; move it, or choose another --out");
  found_ = run_kind(dir);
  if (found_ != RunKind::none && found_ != kind && found_ != RunKind::unknown)
    throw UsageError(out + " holds " + describe(found_) + ", which " + command +
                     " never replaces; choose another --out");
  if (mode == OutMode::resume && found_ == RunKind::none)
    throw UsageError("--resume: " + out + " holds no run to continue (no " +
                     (kind == RunKind::gpt ? "train_state.safetensors" : "seq2seq_state.safetensors") + ")");
  if (mode == OutMode::fresh && found_ != RunKind::none)
    throw UsageError(out + " already holds " + describe(found_) + "; " +
                     "add --resume to continue it, " +
                     "add --overwrite to start over there, or choose another --out");
  remove_stale_temp_files(dir);
  mode_ = mode;
}

void RunDirectory::begin_writing() {
  writing_ = true;
  set_exit_at_once_cleanup("", {}, {});  // from now on the directory holds this run
  if (mode_ != OutMode::overwrite) return;
  for (const std::string& file : run_files(dir_)) {
    std::error_code ec;
    fs::remove(file, ec);
    HEED_CHECK(!ec, file, ": cannot remove the old run's file (", ec.message(), ")");
  }
  mode_ = OutMode::fresh;  // once
}

void RunDirectory::release() {
  if (lock_fd_ < 0) return;
  set_exit_at_once_cleanup("", {}, {});
  // A command that ends before it began writing (refused, or failed while reading) leaves the
  // directory as it found it: no lock file it made, no directory it made (a typo in --data must
  // not leave runs/new/.heed.lock behind). The lock is still held while its file goes, so no
  // other heed can be in the directory; rmdir removes only what is empty.
  if (!writing_ && created_lock_) ::unlink(lock_file_.c_str());
  ::close(lock_fd_);  // closing the descriptor releases the flock
  lock_fd_ = -1;
  if (writing_) return;
  for (const std::string& d : created_dirs_)
    if (::rmdir(d.c_str()) != 0) break;  // not empty (someone else's files): leave it and its parents
}

RunDirectory::~RunDirectory() { release(); }

}  // namespace heed::cli
