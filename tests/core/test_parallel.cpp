// The worker pool behind heed's own kernels: coverage, nesting, errors, and kernels giving the
// same bits whatever the thread count.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/heed.h"
#include "nn/attention.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "support/helpers.h"

using namespace heed;


namespace {
// Restores the thread count a test changed.
struct ThreadsGuard {
  int saved = num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};
}  // namespace

TEST_CASE("parallel_for covers every index exactly once, in contiguous chunks", "[parallel]") {
  ThreadsGuard guard;
  for (int threads : {1, 2, 3, 7}) {
    set_num_threads(threads);
    for (int64_t n : {0, 1, 5, 1000, 100003}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> chunks{0};
      parallel_for(n, 1, [&](int64_t b, int64_t e) {
        REQUIRE(b < e);
        ++chunks;
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      });
      for (int64_t i = 0; i < n; ++i) REQUIRE(hits[static_cast<size_t>(i)] == 1);
      CHECK(chunks <= threads);
    }
  }
}

TEST_CASE("parallel_for: back-to-back jobs each run every chunk once, whoever claims it", "[parallel]") {
  // Chunks are claimed by the caller and the workers from one counter: a job must neither lose a
  // chunk nor run one twice, nor run a chunk of the previous job's function, however the threads
  // interleave (the caller often takes the workers' chunks before they wake).
  ThreadsGuard guard;
  for (int threads : {2, 3, 5}) {
    set_num_threads(threads);
    for (int job = 0; job < 2000; ++job) {
      const int64_t n = 1 + job % 7;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      parallel_for(n, 1, [&, job](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)] += 1 + job % 3;
      });
      for (int64_t i = 0; i < n; ++i) REQUIRE(hits[static_cast<size_t>(i)] == 1 + job % 3);
    }
  }
}

TEST_CASE("parallel_for: the caller claims chunks from the first up, the workers from the last down", "[parallel]") {
  // So that, with a chunk per thread, the caller runs chunk 0 of every job and an op finds the rows
  // it wrote in the op before in its own core's cache (core/parallel.cpp, Pool::claim).
  ThreadsGuard guard;
  const std::thread::id caller = std::this_thread::get_id();
  for (int threads : {2, 3, 5}) {
    set_num_threads(threads);
    for (int job = 0; job < 500; ++job) {
      std::mutex m;
      std::map<std::thread::id, std::vector<int64_t>> runs;  // each thread's chunks, in the order it ran them
      parallel_for(threads, 1, [&](int64_t b, int64_t) {
        {
          std::lock_guard<std::mutex> lock(m);
          runs[std::this_thread::get_id()].push_back(b);
        }
        // Jobs of different lengths, so that the threads meet at different points of a job.
        for (int spin = 0; spin < 200 * (job % 5); ++spin) asm volatile("" ::: "memory");
      });
      for (const auto& [id, chunks] : runs) {
        INFO(threads << " threads, job " << job << (id == caller ? ", the caller" : ", a worker"));
        for (size_t i = 0; i < chunks.size(); ++i) {
          if (id == caller) {
            CHECK(chunks[i] == static_cast<int64_t>(i));  // 0, 1, 2, ...
          } else if (i > 0) {
            CHECK(chunks[i] < chunks[i - 1]);  // downwards
          }
        }
      }
    }
  }
}

TEST_CASE("parallel_for runs small work and nested calls inline", "[parallel]") {
  ThreadsGuard guard;
  set_num_threads(4);
  int calls = 0;  // not atomic: inline means one chunk on this thread
  parallel_for(100, 1000, [&](int64_t b, int64_t e) { calls += (b == 0 && e == 100); });
  CHECK(calls == 1);
  std::atomic<int> inner_chunks{0};
  parallel_for(4, 1, [&](int64_t, int64_t) {
    parallel_for(1000, 1, [&](int64_t b, int64_t e) { inner_chunks += (b == 0 && e == 1000); });
  });
  CHECK(inner_chunks == 4);
}

TEST_CASE("parallel_for rethrows a chunk's exception after all chunks finish", "[parallel]") {
  ThreadsGuard guard;
  set_num_threads(3);
  std::atomic<int> finished{0};
  REQUIRE_THROWS_WITH(parallel_for(3, 1,
                                   [&](int64_t b, int64_t) {
                                     if (b > 0) HEED_CHECK(false, "chunk starting at ", b, " failed");
                                     ++finished;
                                   }),
                      Catch::Contains("failed"));
  CHECK(finished == 1);
  // The pool still works afterwards.
  std::atomic<int64_t> sum{0};
  parallel_for(300, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  CHECK(sum == 299 * 300 / 2);
  // Whichever thread ran the throwing chunk, its exception belongs to its own job: never lost,
  // never rethrown by the next one.
  for (int round = 0; round < 300; ++round) {
    REQUIRE_THROWS(parallel_for(3, 1, [&](int64_t b, int64_t) { HEED_CHECK(b != 2, "chunk 2 failed"); }));
    REQUIRE_NOTHROW(parallel_for(3, 1, [](int64_t, int64_t) {}));
  }
}

TEST_CASE("parallel_for_each runs every item once, on no more threads than the budget, each as its own chunk",
          "[parallel]") {
  ThreadsGuard guard;
  set_num_threads(7);  // starts 6 workers, which stay in the pool below
  parallel_for(7, 1, [](int64_t, int64_t) {});
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    constexpr int64_t kItems = 40;
    std::vector<std::atomic<int>> runs(kItems);
    std::atomic<int> running{0}, most{0};
    std::mutex mutex;
    std::map<std::thread::id, int> items_by_thread;
    const auto t0 = std::chrono::steady_clock::now();
    parallel_for_each(kItems, [&](int64_t i) {
      const int now = ++running;
      for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
      }
      std::this_thread::sleep_for(std::chrono::microseconds(300));  // long enough for every thread to join in
      ++runs[static_cast<size_t>(i)];
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++items_by_thread[std::this_thread::get_id()];
      }
      // With a budget of several threads, item 0 waits (up to 10 s) for another thread to take an
      // item: on a loaded machine the caller alone once ran all 40 before a worker woke (12 ms),
      // which is no failure to share. A pool that never shares still fails below, after 10 s.
      if (i == 0 && threads > 1) {
        while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
          {
            std::lock_guard<std::mutex> lock(mutex);
            if (items_by_thread.size() > 1) break;
          }
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      }
      --running;
    });
    INFO(threads << " threads");
    for (int64_t i = 0; i < kItems; ++i) REQUIRE(runs[static_cast<size_t>(i)] == 1);
    // The workers started for 7 threads stay idle: the job admits the budget, not the pool.
    CHECK(most <= threads);
    CHECK(static_cast<int>(items_by_thread.size()) <= threads);
    if (threads > 1) CHECK(items_by_thread.size() > 1);  // items, not contiguous runs of them, are shared out
  }
  // Nested: inline on the calling chunk's thread. An item's exception comes back to the caller.
  set_num_threads(2);
  std::atomic<int> inner{0};
  parallel_for_each(2, [&](int64_t) {
    const std::thread::id outer = std::this_thread::get_id();
    parallel_for_each(5, [&](int64_t) { inner += std::this_thread::get_id() == outer; });
  });
  CHECK(inner == 10);
  REQUIRE_THROWS_WITH(parallel_for_each(9, [](int64_t i) { HEED_CHECK(i != 4, "item 4 failed"); }),
                      Catch::Contains("item 4 failed"));
  REQUIRE_THROWS_WITH(parallel_for_each(70000, [](int64_t) {}), Catch::Contains("65535"));
}

TEST_CASE("attention and gelu give the same bits on 1 and 3 threads", "[parallel]") {
  ThreadsGuard guard;
  auto run = [](int threads) {
    set_num_threads(threads);

    nn::MultiHeadAttention attn(nn::MultiHeadAttentionOptions{.d_model = 32, .n_head = 4, .causal = true, .seed = 3});
    Generator gen(11);
    Tensor x = Tensor::randn({6, 40, 32}, gen).requires_grad_();
    Tensor y = gelu(attn.forward(x));
    sum(mul(y, y)).backward();
    std::vector<float> out = y.to_vector<float>();
    std::vector<float> gx = x.grad().to_vector<float>();
    out.insert(out.end(), gx.begin(), gx.end());
    return out;
  };
  const std::vector<float> one = run(1), three = run(3);
  REQUIRE(one.size() == three.size());
  for (size_t i = 0; i < one.size(); ++i) REQUIRE(one[i] == three[i]);
}

TEST_CASE("linear's products give the same bits on 1, 2, 3, 4 and 7 threads (pieces, dx and dW as a pair)", "[parallel]") {
  // A BLAS product's pieces follow from its shape and the cores, never from the thread count
  // (core/tuning.h, kProductPieceMacs), and so do those of dx and dW when they run as a pair.
  // baby's MLP in float32, and a float64 product whose OpenBLAS pieces of a third sum in another
  // order than the whole (measured on its SkylakeX kernels), so a piece count that followed the
  // threads would show. This case runs on oneDNN and again on OpenBLAS ("openblas: ...").
  ThreadsGuard guard;
  struct Case {
    DType dtype;
    Shape x, w;
  };
  // On oneDNN with its packed sgemm, the forward and dx of a Linear of 2^26 multiply-adds or more
  // (the third case: 12 pieces on 2 cores) run on one packed copy of the weight, in pieces claimed
  // one at a time (core/ops/matmul.cpp, packed_b_product). With AVX-512, the fourth case's dW
  // (g 1 536 floats wide) runs on heed's own A^T B kernel (core/ops/sgemm_at_b.h), in 16 pieces on
  // 2 cores, claimed one at a time.
  for (const Case& c : {Case{DType::f32, {12, 64, 128}, {512, 128}}, Case{DType::f64, {100, 1024}, {1024, 1024}},
                        Case{DType::f32, {2, 256, 384}, {1152, 384}}, Case{DType::f32, {512, 384}, {1536, 384}}}) {
    auto run = [&](int threads) {
      set_num_threads(threads);
      Generator gen(5);
      Tensor x = Tensor::randn(c.x, gen).to(c.dtype).requires_grad_();
      Tensor w = Tensor::randn(c.w, gen).to(c.dtype).requires_grad_();
      Tensor y = linear(x, w, Tensor());
      sum(mul(y, y)).backward();
      std::vector<double> out = y.to_vector<double>();  // float32 values convert exactly
      for (const Tensor* g : {&x, &w}) {
        std::vector<double> v = g->grad().to_vector<double>();
        out.insert(out.end(), v.begin(), v.end());
      }
      return out;
    };
    const std::vector<double> one = run(1);
    for (const int threads : {2, 3, 4, 7}) {
      const std::vector<double> other = run(threads);
      INFO(dtype_name(c.dtype) << " x " << to_string(c.x) << " w " << to_string(c.w) << " on " << threads << " threads");
      REQUIRE(one.size() == other.size());
      REQUIRE(std::memcmp(one.data(), other.data(), one.size() * sizeof(double)) == 0);
    }
  }
}

TEST_CASE("parallel_for_blocks hands out the same fixed blocks on any thread count", "[parallel]") {
  ThreadsGuard guard;
  auto blocks_seen = [](int threads) {
    set_num_threads(threads);
    std::vector<std::atomic<int64_t>> ends(10);  // block k -> the end it was given
    for (auto& e : ends) e = -1;
    parallel_for_blocks(1000, 100, 1, [&](int64_t b, int64_t e) {
      REQUIRE(b % 100 == 0);
      ends[static_cast<size_t>(b / 100)] = e;
    });
    std::vector<int64_t> out;
    for (auto& e : ends) out.push_back(e);
    return out;
  };
  const std::vector<int64_t> want = {100, 200, 300, 400, 500, 600, 700, 800, 900, 1000};
  CHECK(blocks_seen(1) == want);
  CHECK(blocks_seen(3) == want);
  set_num_threads(2);
  int64_t last_end = -1;  // a short last block, and inline when below min_parallel
  parallel_for_blocks(250, 100, 1 << 20, [&](int64_t, int64_t e) { last_end = e; });
  CHECK(last_end == 250);
}

TEST_CASE("parallel_for_blocks over several arrays covers each block of each array once", "[parallel]") {
  ThreadsGuard guard;
  const std::vector<int64_t> lengths = {250, 0, 100, 7, 1000};
  auto coverage = [&](int threads) {
    set_num_threads(threads);
    // visits[a][i] counts how often element i of array a was handed out; starts[a] records the
    // blocks' first elements, which must be the fixed multiples of the block size.
    std::vector<std::vector<std::atomic<int>>> visits;
    for (int64_t n : lengths) visits.emplace_back(static_cast<size_t>(n));
    std::atomic<int> misaligned{0};
    parallel_for_blocks(lengths, 100, 1, [&](size_t a, int64_t b, int64_t e) {
      if (b % 100 != 0 || e != std::min(lengths[a], b + 100)) ++misaligned;
      for (int64_t i = b; i < e; ++i) ++visits[a][static_cast<size_t>(i)];
    });
    CHECK(misaligned == 0);
    for (auto& v : visits)
      for (auto& c : v) CHECK(c == 1);
  };
  coverage(1);
  coverage(2);
  coverage(3);
}

TEST_CASE("layer norm, gradient clipping and AdamW give the same bits on 1 and 3 threads", "[parallel]") {
  ThreadsGuard guard;
  // Sizes past every split threshold (and ragged, so blocks end mid-batch), plus small tensors
  // that share the optimizer's one job with them.
  const std::vector<Shape> shapes = {{300, 257}, {7}, {1000, 131}, {3, 5}};
  auto run = [&](int threads) {
    set_num_threads(threads);
    Generator gen(21);
    Tensor x = Tensor::randn({96, 333}, gen).requires_grad_();
    Tensor w = Tensor::randn({333}, gen).requires_grad_(), b = Tensor::randn({333}, gen).requires_grad_();
    Tensor y = layer_norm(x, w, b);
    sum(mul(y, Tensor::randn({96, 333}, gen))).backward();
    std::vector<float> out = y.to_vector<float>();
    for (const Tensor& t : {x.grad(), w.grad(), b.grad()}) {
      const auto v = t.to_vector<float>();
      out.insert(out.end(), v.begin(), v.end());
    }
    // Two optimizer steps with clipped, fixed gradients.
    std::vector<Tensor> params;
    optim::NamedTensors named;
    for (size_t i = 0; i < shapes.size(); ++i) {
      params.push_back(Tensor::randn(shapes[i], gen).requires_grad_());
      std::string name = "p";  // (not "p" + ...: GCC 12 warns falsely, PR 105651)
      name += std::to_string(i);
      named.emplace_back(name, params.back());
    }
    optim::AdamW opt({optim::ParamGroup{named, 0.1}}, 1e-2);
    for (int step = 0; step < 2; ++step) {
      for (Tensor& p : params) sum(mul(p, Tensor::randn(p.shape(), gen))).backward();
      out.push_back(static_cast<float>(optim::clip_grad_norm(params, 0.5)));
      opt.step();
      opt.zero_grad();
    }
    for (const Tensor& p : params) {
      const auto v = p.to_vector<float>();
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  };
  const std::vector<float> one = run(1), three = run(3);
  REQUIRE(one.size() == three.size());
  size_t differ = 0;
  for (size_t i = 0; i < one.size(); ++i) differ += one[i] != three[i];
  CHECK(differ == 0);
}
