// Test support: N ranks as threads of one process, talking through dist::Communicator, so the
// distributed code runs in the unit tests (and under the sanitizers) without MPI.
//
// Transfers behave like MPI's rendezvous: a send completes only once a matching receive has
// copied its data, receives match sends in posting order per (from, to, tag), and nothing is
// buffered, so code that reuses a send buffer too early or waits in the wrong order fails here too.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "dist/communicator.h"

namespace heed::test {

class ThreadHub {
 public:
  /// Runs fn(comm) on `size` threads, one per rank, and rethrows the first exception any threw.
  static void run(int size, const std::function<void(dist::Communicator&)>& fn) {
    ThreadHub hub(size);
    std::vector<std::exception_ptr> errors(size);
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r)
      threads.emplace_back([&, r] {
        try {
          fn(*hub.ranks_[r]);
        } catch (...) {
          errors[r] = std::current_exception();
          hub.fail();
        }
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

 private:
  struct Transfer {
    float* to = nullptr;  // receive: destination
    const float* from = nullptr;  // send: source
    int64_t n = 0;
    bool done = false;
  };
  using Channel = std::tuple<int, int, int>;  // (from, to, tag)

  class Rank final : public dist::Communicator {
   public:
    Rank(ThreadHub& hub, int rank) : hub_(hub), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return hub_.size_; }
    dist::Request send(const float* data, int64_t n, int to, int tag) override {
      return post(true, const_cast<float*>(data), n, to, tag);
    }
    dist::Request recv(float* data, int64_t n, int from, int tag) override { return post(false, data, n, from, tag); }
    bool test(dist::Request r) override {
      std::unique_lock<std::mutex> lock(hub_.mu_);
      hub_.check_failed();
      hub_.match();
      return take_if_done(r);
    }
    void wait(dist::Request r) override {
      std::unique_lock<std::mutex> lock(hub_.mu_);
      for (;;) {
        hub_.check_failed();
        hub_.match();
        if (take_if_done(r)) return;
        // A wait that nothing can end is a bug in the code under test: fail instead of hanging.
        if (hub_.cv_.wait_for(lock, std::chrono::seconds(60)) == std::cv_status::timeout)
          throw std::runtime_error("rank " + std::to_string(rank_) + ": a wait did not end in 60 s");
      }
    }
    std::vector<char> all_gather(const void* data, size_t bytes) override {
      std::unique_lock<std::mutex> lock(hub_.mu_);
      hub_.check_failed();
      const uint64_t generation = hub_.gather_generation_;
      hub_.gather_parts_[rank_].assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
      if (++hub_.gather_count_ == hub_.size_) {
        hub_.gather_result_.clear();
        for (auto& part : hub_.gather_parts_) {
          if (part.size() != bytes) throw std::logic_error("all_gather: ranks passed different sizes");
          hub_.gather_result_.insert(hub_.gather_result_.end(), part.begin(), part.end());
        }
        hub_.gather_count_ = 0;
        ++hub_.gather_generation_;
        hub_.cv_.notify_all();
      } else {
        hub_.cv_.wait(lock, [&] { return hub_.gather_generation_ != generation || hub_.failed_; });
        hub_.check_failed();
      }
      return hub_.gather_result_;
    }
    [[noreturn]] void abort(int exit_code) override {
      throw std::runtime_error("rank " + std::to_string(rank_) + " aborted the run with code " +
                               std::to_string(exit_code));
    }

   private:
    dist::Request post(bool is_send, float* data, int64_t n, int peer, int tag) {
      if (peer < 0 || peer >= hub_.size_ || peer == rank_) throw std::logic_error("a transfer to a non-peer");
      if (tag < 0 || tag > kMaxTag) throw std::logic_error("a tag outside [0, kMaxTag]");
      std::unique_lock<std::mutex> lock(hub_.mu_);
      auto t = std::make_shared<Transfer>();
      if (is_send) t->from = data;
      else t->to = data;
      t->n = n;
      const Channel channel = is_send ? Channel{rank_, peer, tag} : Channel{peer, rank_, tag};
      (is_send ? hub_.sends_ : hub_.recvs_)[channel].push_back(t);
      requests_.push_back(t);
      hub_.match();
      return static_cast<dist::Request>(requests_.size() - 1);
    }
    bool take_if_done(dist::Request r) {
      if (r < 0 || static_cast<size_t>(r) >= requests_.size() || !requests_[r])
        throw std::logic_error("test/wait of an unknown or spent request");
      if (!requests_[r]->done) return false;
      requests_[r].reset();
      return true;
    }
    ThreadHub& hub_;
    int rank_;
    std::vector<std::shared_ptr<Transfer>> requests_;
  };

  explicit ThreadHub(int size) : size_(size), gather_parts_(size) {
    for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
  }
  // Pairs the oldest send with the oldest receive of every channel (mu_ held).
  void match() {
    bool any = false;
    for (auto& [channel, sends] : sends_) {
      auto& recvs = recvs_[channel];
      while (!sends.empty() && !recvs.empty()) {
        Transfer& s = *sends.front();
        Transfer& r = *recvs.front();
        if (s.n != r.n) throw std::logic_error("a send and its receive have different lengths");
        if (s.n) std::memcpy(r.to, s.from, s.n * sizeof(float));
        s.done = r.done = true;
        sends.pop_front();
        recvs.pop_front();
        any = true;
      }
    }
    if (any) cv_.notify_all();
  }
  void fail() {
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = true;
    cv_.notify_all();
  }
  void check_failed() const {
    if (failed_) throw std::runtime_error("another rank failed");
  }

  int size_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool failed_ = false;
  std::map<Channel, std::deque<std::shared_ptr<Transfer>>> sends_, recvs_;
  std::vector<std::vector<char>> gather_parts_;
  std::vector<char> gather_result_;
  int gather_count_ = 0;
  uint64_t gather_generation_ = 0;
};

}  // namespace heed::test
