// Gradient accumulation shared by N ranks (dist/grad_reducer.h), with ranks as threads: the
// gradient of a step has the bits of the tree sum over the micro-batches whatever N, with and
// without overlap, whatever the buckets; and so a whole training run has the same bits.
#include <catch2/catch.hpp>
#include <atomic>
#include <bit>
#include <chrono>
#include <thread>
#include <cstring>
#include <map>
#include <mutex>

#include "core/autograd.h"
#include "dist/grad_reducer.h"
#include "dist/micro_batch_generators.h"
#include "dist/param_checksum.h"
#include "nn/dropout.h"
#include "nn/gpt.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "thread_hub.h"

using namespace heed;
using dist::Span;

namespace {

constexpr int64_t B = 2, T = 8;

nn::GPTConfig tiny_config(double dropout) {
  return {.vocab_size = 13, .block_size = T, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = dropout, .bias = true};
}

// Micro-batch i of step s: B*T inputs and targets, the same on every rank.
void micro_batch(int64_t step, int64_t i, std::vector<int32_t>& x, std::vector<int32_t>& y) {
  Generator gen(1000 * step + i);
  x.resize(B * T);
  y.resize(B * T);
  for (auto& v : x) v = static_cast<int32_t>(gen.randint(13));
  for (auto& v : y) v = static_cast<int32_t>(gen.randint(13));
}

void collect_dropouts(nn::Module& m, std::vector<Generator*>& out) {
  if (auto* d = dynamic_cast<nn::Dropout*>(&m)) out.push_back(&d->generator());
  for (auto& [name, child] : m.children()) collect_dropouts(*child, out);
}

std::vector<float> flat_grads(const nn::GPT& model) {
  std::vector<float> out;
  for (auto& [name, t] : model.named_parameters()) {
    auto v = t.grad().to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

std::vector<float> flat_params(const nn::GPT& model) {
  std::vector<float> out;
  for (auto& [name, t] : model.named_parameters()) {
    auto v = t.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

struct Run {
  std::vector<double> losses;      // per step, as rank 0 saw it
  std::vector<float> first_grads;  // the mean gradient of step 0
  std::vector<float> params;       // at the end
  size_t buckets = 0;
  int64_t sends_in_backward = 0;
};

// Sends made while a backward pass runs (autograd turns grad mode off there) are counted, so a
// test can tell that the reduction overlapped the backward.
class CountingComm final : public dist::Communicator {
 public:
  explicit CountingComm(dist::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  dist::Request send(const float* d, int64_t n, int to, int tag) override {
    if (!grad_mode_enabled()) ++sends_in_backward;
    return inner_.send(d, n, to, tag);
  }
  dist::Request recv(float* d, int64_t n, int from, int tag) override { return inner_.recv(d, n, from, tag); }
  bool test(dist::Request r) override { return inner_.test(r); }
  dist::Request start_all_gather(const void* d, size_t bytes, void* out) override {
    return inner_.start_all_gather(d, bytes, out);
  }
  [[noreturn]] void abort(int code) override {
    inner_.abort(code);
    std::terminate();  // not reached: abort does not return
  }
  int64_t sends_in_backward = 0;

 private:
  dist::Communicator& inner_;
};

// `steps` AdamW steps of the tiny GPT with A micro-batches shared by N thread ranks.
Run train(int N, int64_t A, int steps, dist::GradReducerOptions options, double dropout = 0.0) {
  options.micro_batches = A;
  Run out;
  std::mutex mu;
  test::ThreadHub::run(N, [&](dist::Communicator& hub) {
    CountingComm comm(hub);
    nn::GPT model(tiny_config(dropout), 7);
    model.train();
    optim::AdamW opt(optim::param_groups_nanogpt(model.named_parameters(), 0.1), 1e-2, 0.9, 0.99);
    dist::GradReducer reducer(model.parameters(), comm, options);
    std::vector<Generator*> gens;
    collect_dropouts(model, gens);
    dist::MicroBatchGenerators streams(gens, A, N);
    std::vector<double> step_losses;
    std::vector<float> first;
    std::vector<int32_t> x, y;
    for (int s = 0; s < steps; ++s) {
      std::vector<double> losses;
      const Span mine = reducer.local_micro_batches();
      for (int64_t i = mine.lo; i < mine.hi; ++i) {
        micro_batch(s, i, x, y);
        streams.begin_micro_batch(i);
        Tensor loss = model.loss(x, y, B, T);
        losses.push_back(loss.item());
        reducer.backward(loss);
      }
      reducer.finish_step();
      streams.end_step();
      step_losses.push_back(reducer.mean_loss(losses));
      if (s == 0) first = flat_grads(model);
      optim::clip_grad_norm(model.parameters(), 1.0);
      opt.step();
      model.zero_grad();
      dist::require_same_parameters(comm, model.named_parameters());
    }
    std::lock_guard<std::mutex> lock(mu);
    out.sends_in_backward += comm.sends_in_backward;
    if (comm.rank() == 0) {
      out.losses = step_losses;
      out.first_grads = first;
      out.params = flat_params(model);
      out.buckets = reducer.bucket_count();
    }
  });
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("a step's gradient is the tree sum of the micro-batch gradients over A, on 1 and 3 ranks",
          "[dist][reducer]") {
  const int64_t A = 6;
  // The definition, by hand: each micro-batch's gradient alone, added in the tree, divided by A.
  nn::GPT model(tiny_config(0.0), 7);
  std::vector<std::vector<float>> g;
  std::vector<int32_t> x, y;
  for (int64_t i = 0; i < A; ++i) {
    micro_batch(0, i, x, y);
    model.loss(x, y, B, T).backward();
    g.push_back(flat_grads(model));
    model.zero_grad();
  }
  std::vector<float> expected(g[0].size());
  std::vector<float> v(A);
  for (size_t e = 0; e < expected.size(); ++e) {
    // ((g0 + g1) + (g2 + g3)) + (g4 + g5): the tree over 6
    for (int64_t i = 0; i < A; ++i) v[i] = g[i][e];
    expected[e] = (((v[0] + v[1]) + (v[2] + v[3])) + (v[4] + v[5])) / 6.0f;
  }
  for (int N : {1, 2, 3, 6}) {
    INFO("N " << N);
    REQUIRE(same_bits(train(N, A, 1, {}).first_grads, expected));
  }
}

TEST_CASE("training with gradient accumulation has the same bits for every N dividing A", "[dist][reducer]") {
  for (int64_t A : {2, 4, 6}) {
    const Run one = train(1, A, 3, {});
    for (int N = 2; N <= A; ++N) {
      if (A % N) continue;
      INFO("A " << A << ", N " << N);
      const Run many = train(N, A, 3, {});
      REQUIRE(many.losses == one.losses);
      REQUIRE(same_bits(many.params, one.params));
    }
  }
}

TEST_CASE("overlap and bucket size change when bytes move, never the bits", "[dist][reducer]") {
  const Run reference = train(3, 3, 2, {.overlap = false});
  REQUIRE(reference.sends_in_backward == 0);
  for (int64_t bucket_bytes : {int64_t(4), int64_t(1000), int64_t(1) << 30}) {
    INFO("bucket_bytes " << bucket_bytes);
    const Run overlapped = train(3, 3, 2, {.overlap = true, .bucket_bytes = bucket_bytes});
    REQUIRE(same_bits(overlapped.params, reference.params));
    REQUIRE(overlapped.losses == reference.losses);
    if (bucket_bytes == 4) REQUIRE(overlapped.buckets > 10);
    if (bucket_bytes == int64_t(1) << 30) REQUIRE(overlapped.buckets == 1);
    // With several buckets, some leave while the backward is still running.
    if (overlapped.buckets > 1) REQUIRE(overlapped.sends_in_backward > 0);
  }
}

TEST_CASE("dropout masks belong to the micro-batch: the same bits for every N", "[dist][reducer]") {
  const Run one = train(1, 4, 3, {}, 0.2);
  const Run two = train(2, 4, 3, {}, 0.2);
  const Run four = train(4, 4, 3, {}, 0.2);
  REQUIRE(two.losses == one.losses);
  REQUIRE(four.losses == one.losses);
  REQUIRE(same_bits(two.params, one.params));
  REQUIRE(same_bits(four.params, one.params));
  // The masks are really drawn: without dropout the run differs.
  REQUIRE_FALSE(same_bits(train(1, 4, 3, {}, 0.0).params, one.params));
}

TEST_CASE("one micro-batch on one process is a plain step", "[dist][reducer]") {
  nn::GPT plain(tiny_config(0.1), 3), reduced(tiny_config(0.1), 3);
  std::vector<int32_t> x, y;
  micro_batch(0, 0, x, y);
  plain.loss(x, y, B, T).backward();
  dist::LocalCommunicator local;
  dist::GradReducer reducer(reduced.parameters(), local, {});
  std::vector<Generator*> gens;
  collect_dropouts(reduced, gens);
  dist::MicroBatchGenerators streams(gens, 1, 1);
  const Generator::State before = gens[0]->state();
  streams.begin_micro_batch(0);
  REQUIRE(gens[0]->state() == before);  // not reseeded: plain runs keep their stream
  Tensor loss = reduced.loss(x, y, B, T);
  reducer.backward(loss);
  reducer.finish_step();
  REQUIRE(reducer.mean_loss({loss.item()}) == loss.item());
  REQUIRE(same_bits(flat_grads(reduced), flat_grads(plain)));
}

TEST_CASE("a step's gradients stay as they were through the next step: a graph over them still runs",
          "[dist][reducer][version]") {
  // After finish_step every .grad is a view of the step's result buffer; the next step sums into
  // a new one. So a graph built on a gradient (a second-order use) may still run backward, on the
  // values it was built on, and nothing counts a write.
  nn::GPT model(tiny_config(0.0), 3);
  dist::LocalCommunicator local;
  dist::GradReducer reducer(model.parameters(), local, {.micro_batches = 2});
  std::vector<int32_t> x, y;
  auto step = [&](int64_t s) {
    for (int64_t i = 0; i < 2; ++i) {
      micro_batch(s, i, x, y);
      reducer.backward(model.loss(x, y, B, T));
    }
    reducer.finish_step();
  };
  step(0);
  const Tensor g = model.parameters()[0].grad();
  Tensor w = Tensor::ones(g.shape()).requires_grad_();
  Tensor loss = sum(mul(w, g));  // keeps g for w's gradient
  const uint64_t before = g.version();
  const std::vector<float> values = g.to_vector<float>();
  for (Tensor& p : model.parameters()) p.zero_grad();  // drops the .grad handles, not the buffer
  step(1);
  CHECK(g.version() == before);
  CHECK(g.to_vector<float>() == values);
  CHECK_FALSE(model.parameters()[0].grad().storage() == g.storage());
  loss.backward();
  CHECK(w.grad().to_vector<float>() == values);  // d sum(w * g) / dw = g, the step-0 gradient
}

TEST_CASE("the reducer refuses what it cannot do, naming the problem", "[dist][reducer]") {
  nn::GPT model(tiny_config(0.0), 3);
  test::ThreadHub::run(2, [&](dist::Communicator& comm) {
    nn::GPT m(tiny_config(0.0), 3);
    REQUIRE_THROWS_WITH(dist::GradReducer(m.parameters(), comm, {.micro_batches = 3}),
                        Catch::Contains("3 micro-batches per step cannot be shared by 2 processes"));
  });
  dist::LocalCommunicator local;
  REQUIRE_THROWS_WITH(dist::GradReducer(model.parameters(), local, {.micro_batches = 0}),
                      Catch::Contains("at least 1 micro-batch"));
  std::vector<Tensor> twice{model.parameters()[0], model.parameters()[0]};
  REQUIRE_THROWS_WITH(dist::GradReducer(twice, local, {.micro_batches = 2}), Catch::Contains("listed twice"));
  dist::GradReducer reducer(model.parameters(), local, {.micro_batches = 2});
  std::vector<int32_t> x, y;
  micro_batch(0, 0, x, y);
  REQUIRE_THROWS_WITH(reducer.finish_step(), Catch::Contains("after 0 of this rank's 2 micro-batches"));
  reducer.backward(model.loss(x, y, B, T));
  reducer.backward(model.loss(x, y, B, T));
  REQUIRE_THROWS_WITH(reducer.backward(model.loss(x, y, B, T)), Catch::Contains("call finish_step() first"));
  reducer.finish_step();
  // The optimizer step would go here; without zero_grad the next step refuses to start.
  REQUIRE_THROWS_WITH(reducer.backward(model.loss(x, y, B, T)), Catch::Contains("call zero_grad"));
}

TEST_CASE("a stop request abandons the step, also while waiting for a rank that never sends", "[dist][reducer]") {
  std::atomic<bool> stop{false};
  std::vector<int32_t> x, y;
  micro_batch(0, 0, x, y);
  test::ThreadHub::run(2, [&](dist::Communicator& comm) {
    if (comm.rank() == 1) return;  // a peer that died: it never contributes
    comm.set_stop_check([&] { return stop.load(); });
    nn::GPT model(tiny_config(0.0), 3);
    const std::vector<float> before = flat_params(model);
    dist::GradReducer reducer(model.parameters(), comm, {.micro_batches = 2});
    reducer.backward(model.loss(x, y, B, T));
    std::thread later([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      stop = true;
    });
    REQUIRE_THROWS_AS(reducer.finish_step(), dist::Stopped);
    later.join();
    REQUIRE(same_bits(flat_params(model), before));  // the state the step started from
    REQUIRE_THROWS_AS(comm.all_gather("x", 1), dist::Stopped);  // every wait asks
  });
  // Asked before the backward, and each time the hook runs: the hook is removed on the way out.
  for (int stop_at : {1, 4}) {
    test::ThreadHub::run(2, [&](dist::Communicator& comm) {
      nn::GPT model(tiny_config(0.0), 3);
      int asked = 0;
      comm.set_stop_check([&] { return comm.rank() == 0 && ++asked >= stop_at; });
      dist::GradReducer reducer(model.parameters(), comm, {.micro_batches = 2});
      if (comm.rank() == 0) {
        REQUIRE_THROWS_AS(reducer.backward(model.loss(x, y, B, T)), dist::Stopped);
        REQUIRE(asked == stop_at);  // 4: from inside the backward's hook
        REQUIRE_FALSE(set_grad_ready_hook(nullptr));
      }
    });
  }
}
