// Test support: N ranks as threads of one process, talking through dist::Communicator, so the
// distributed code runs in the unit tests (and under the sanitizers) without MPI.
//
// Transfers behave like MPI's rendezvous: a send completes only once a matching receive has
// copied its data, receives match sends in posting order per (from, to, tag), and nothing is
// buffered, so code that reuses a send buffer too early fails here too. A transfer that nothing
// completes within a minute (a bug in the code under test) throws instead of hanging the tests.
#pragma once

#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
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
        }
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

 private:
  static constexpr auto kPatience = std::chrono::seconds(60);

  struct Transfer {
    float* to = nullptr;          // receive: destination
    const float* from = nullptr;  // send: source
    int64_t n = 0;
    bool done = false;
    // an all-gather: round `round`, `bytes` per rank, into `out`
    bool gather = false;
    uint64_t round = 0;
    size_t bytes = 0;
    void* out = nullptr;
    std::chrono::steady_clock::time_point posted = std::chrono::steady_clock::now();
  };
  using Channel = std::tuple<int, int, int>;  // (from, to, tag)
  struct Round {
    std::vector<std::vector<char>> parts;
    int arrived = 0, collected = 0;
  };

  class Rank final : public dist::Communicator {
   public:
    Rank(ThreadHub& hub, int rank) : hub_(hub), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return hub_.size_; }
    dist::Request send(const float* data, int64_t n, int to, int tag) override {
      auto t = std::make_shared<Transfer>();
      t->from = data;
      t->n = n;
      return post(t, Channel{rank_, peer(to), tag}, hub_.sends_);
    }
    dist::Request recv(float* data, int64_t n, int from, int tag) override {
      auto t = std::make_shared<Transfer>();
      t->to = data;
      t->n = n;
      return post(t, Channel{peer(from), rank_, tag}, hub_.recvs_);
    }
    dist::Request start_all_gather(const void* data, size_t bytes, void* out) override {
      std::lock_guard<std::mutex> lock(hub_.mu_);
      auto t = std::make_shared<Transfer>();
      t->gather = true;
      t->round = next_round_++;
      t->bytes = bytes;
      t->out = out;
      Round& round = hub_.rounds_[t->round];
      round.parts.resize(hub_.size_);
      round.parts[rank_].assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
      ++round.arrived;
      requests_.push_back(t);
      return static_cast<dist::Request>(requests_.size() - 1);
    }
    bool test(dist::Request r) override {
      std::lock_guard<std::mutex> lock(hub_.mu_);
      if (r < 0 || static_cast<size_t>(r) >= requests_.size() || !requests_[r])
        throw std::logic_error("test of an unknown or spent request");
      Transfer& t = *requests_[r];
      if (t.gather) collect(t);
      else hub_.match();
      if (!t.done) {
        if (std::chrono::steady_clock::now() - t.posted > kPatience)
          throw std::runtime_error("rank " + std::to_string(rank_) + ": a transfer did not complete in 60 s");
        return false;
      }
      requests_[r].reset();
      return true;
    }
    [[noreturn]] void abort(int exit_code) override {
      throw std::runtime_error("rank " + std::to_string(rank_) + " aborted the run with code " +
                               std::to_string(exit_code));
    }

   private:
    int peer(int p) const {
      if (p < 0 || p >= hub_.size_ || p == rank_) throw std::logic_error("a transfer to a non-peer");
      return p;
    }
    dist::Request post(const std::shared_ptr<Transfer>& t, Channel channel,
                       std::map<Channel, std::deque<std::shared_ptr<Transfer>>>& queue) {
      if (std::get<2>(channel) < 0 || std::get<2>(channel) > kMaxTag) throw std::logic_error("a tag outside [0, kMaxTag]");
      std::lock_guard<std::mutex> lock(hub_.mu_);
      queue[channel].push_back(t);
      requests_.push_back(t);
      return static_cast<dist::Request>(requests_.size() - 1);
    }
    // An all-gather is complete once every rank has contributed to its round (mu_ held).
    void collect(Transfer& t) {
      Round& round = hub_.rounds_[t.round];
      if (round.arrived < hub_.size_) return;
      char* out = static_cast<char*>(t.out);
      for (auto& part : round.parts) {
        if (part.size() != t.bytes) throw std::logic_error("all_gather: ranks passed different sizes");
        std::memcpy(out, part.data(), part.size());
        out += part.size();
      }
      t.done = true;
      if (++round.collected == hub_.size_) hub_.rounds_.erase(t.round);
    }
    ThreadHub& hub_;
    int rank_;
    uint64_t next_round_ = 0;
    std::vector<std::shared_ptr<Transfer>> requests_;
  };

  explicit ThreadHub(int size) : size_(size) {
    for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
  }
  // Pairs the oldest send with the oldest receive of every channel (mu_ held).
  void match() {
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
      }
    }
  }

  int size_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::mutex mu_;
  std::map<Channel, std::deque<std::shared_ptr<Transfer>>> sends_, recvs_;
  std::map<uint64_t, Round> rounds_;
};

}  // namespace heed::test
