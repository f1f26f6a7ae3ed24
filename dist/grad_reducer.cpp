#include "dist/grad_reducer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/autograd.h"
#include "core/check.h"

namespace heed::dist {

namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Each bucket has two tags: its partial sums travel under the first, its results under the second.
int tag_of(size_t bucket, int phase) { return static_cast<int>(2 * bucket) + phase - 1; }

// The largest bucket, in floats: a message count must fit MPI's int.
constexpr int64_t kMaxBucketFloats = int64_t(1) << 30;

}  // namespace

GradReducer::GradReducer(std::vector<Tensor> params, Communicator& comm, GradReducerOptions options)
    : params_(std::move(params)),
      comm_(comm),
      options_(options),
      rank_(comm.rank()),
      size_(comm.size()),
      tree_(std::max<int64_t>(options.micro_batches, 1)) {
  const int64_t A = options_.micro_batches;
  HEED_CHECK(A >= 1, "gradient accumulation needs at least 1 micro-batch per step, got ", A);
  HEED_CHECK(A % size_ == 0, A, " micro-batches per step cannot be shared by ", size_,
             " processes: the micro-batch count must be a multiple of the process count");
  HEED_CHECK(options_.bucket_bytes >= 4, "GradReducer: bucket_bytes must be at least 4, got ", options_.bucket_bytes);
  const int64_t per_rank = A / size_;
  mine_ = {rank_ * per_rank, (rank_ + 1) * per_rank};
  std::vector<Span> leaves;
  for (int64_t i = mine_.lo; i < mine_.hi; ++i) leaves.push_back({i, i + 1});
  local_plan_ = plan_merges(tree_, leaves);
  std::vector<Span> all;
  for (int q = 0; q < size_; ++q) {
    const std::vector<Span> c = tree_.cover({q * per_rank, (q + 1) * per_rank});
    partial_sums_of_.push_back(static_cast<int>(c.size()));
    all.insert(all.end(), c.begin(), c.end());
  }
  global_plan_ = plan_merges(tree_, all);

  for (size_t p = 0; p < params_.size(); ++p) {
    const Tensor& t = params_[p];
    HEED_CHECK(t.defined() && t.requires_grad() && !t.grad_fn(), "GradReducer: parameter ", p,
               " is not a trainable leaf tensor");
    HEED_CHECK(t.dtype() == DType::f32, "GradReducer: parameter ", p, " is ", dtype_name(t.dtype()),
               "; gradients are reduced in float32");
    HEED_CHECK(index_of_.emplace(t.impl_ptr().get(), p).second, "GradReducer: parameter ", p, " is listed twice");
  }
  // Reverse order of registration: backward finishes the last layers first.
  offset_.resize(params_.size());
  for (size_t p = params_.size(); p-- > 0;) {
    offset_[p] = total_;
    total_ += params_[p].numel();
  }
  taken_.assign(params_.size(), 0);
  buckets_of_.resize(params_.size());  // stays empty without peers
  if (plain()) return;
  stack_.reserve(local_plan_.depth);
  for (int e = 0; e < local_plan_.depth; ++e) stack_.push_back(Tensor::empty({total_}));
  if (size_ == 1) return;

  // Buckets end at parameter boundaries once they hold bucket_bytes (a parameter larger than
  // kMaxBucketFloats is cut); at most kMaxTag / 2 of them, so that every one has its two tags.
  const int64_t max_buckets = (Communicator::kMaxTag + 1) / 2;
  const int64_t per_bucket = std::min(kMaxBucketFloats, std::max<int64_t>({1, options_.bucket_bytes / 4,
                                                                          (total_ + max_buckets - 1) / max_buckets}));
  int64_t lo = 0;
  for (size_t p = params_.size(); p-- > 0;) {
    const int64_t end = offset_[p] + params_[p].numel();
    for (; end - lo > kMaxBucketFloats; lo += kMaxBucketFloats) buckets_.push_back({.lo = lo, .hi = lo + kMaxBucketFloats});
    if (end - lo >= per_bucket) {
      buckets_.push_back({.lo = lo, .hi = end});
      lo = end;
    }
  }
  if (lo < total_) buckets_.push_back({.lo = lo, .hi = total_});
  HEED_CHECK(static_cast<int64_t>(buckets_.size()) <= max_buckets, "GradReducer: ", buckets_.size(),
             " buckets, more than the ", max_buckets, " that message tags allow");
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t p = 0; p < params_.size(); ++p)
      if (params_[p].numel() > 0 && offset_[p] < buckets_[b].hi && offset_[p] + params_[p].numel() > buckets_[b].lo)
        buckets_of_[p].push_back(b);
  }
  int64_t packed = 0;
  for (Bucket& b : buckets_) {
    b.packed = packed;
    packed += shard(b, rank_).size();
  }
  for (int q = 0; q < size_; ++q)
    for (int e = 0; e < partial_sums_of_[q]; ++e) inbox_.push_back(q == rank_ ? Tensor() : Tensor::empty({packed}));
}

GradReducer::~GradReducer() = default;

bool GradReducer::plain() const { return options_.micro_batches == 1 && size_ == 1; }

Span GradReducer::shard(const Bucket& b, int rank) const {
  const int64_t n = b.hi - b.lo;
  return {b.lo + n * rank / size_, b.lo + n * (rank + 1) / size_};
}

void GradReducer::backward(const Tensor& loss) {
  if (plain()) {
    loss.backward();
    return;
  }
  HEED_CHECK(pass_ < mine_.size(), "GradReducer::backward: this rank has ", mine_.size(),
             " micro-batches per step and they are done; call finish_step() first");
  if (pass_ == 0) {
    for (size_t p = 0; p < params_.size(); ++p)
      HEED_CHECK(!params_[p].grad().defined(), "GradReducer: parameter ", p,
                 " has a gradient at the start of a step (call zero_grad after the optimizer step)");
    result_ = Tensor::empty({total_});
    times_ = {};
    next_start_ = 0;
    for (Bucket& b : buckets_) {
      b.pending = 0;
      b.phase = 0;
      b.requests.clear();
    }
    for (size_t p = 0; p < params_.size(); ++p)
      for (size_t b : buckets_of_[p]) ++buckets_[b].pending;
  }
  comm_.check_stop();
  std::fill(taken_.begin(), taken_.end(), 0);
  const bool last = pass_ + 1 == mine_.size();
  const bool hook = last && options_.overlap && size_ > 1;
  GradReadyHook previous;
  if (hook) previous = set_grad_ready_hook([this](const Tensor& leaf) { on_grad_ready(leaf); });
  try {
    loss.backward();
  } catch (...) {
    if (hook) set_grad_ready_hook(std::move(previous));
    throw;
  }
  if (hook) set_grad_ready_hook(std::move(previous));
  const double t0 = now_s();
  for (size_t p = 0; p < params_.size(); ++p)
    if (!taken_[p]) take(p);  // all of them without overlap; those that got no gradient with it
  if (last && size_ > 1) {
    start_ready_buckets();
    progress();
  }
  depth_ += 1 - local_plan_.merges[pass_];
  ++pass_;
  times_.after_backward += now_s() - t0;
}

void GradReducer::on_grad_ready(const Tensor& leaf) {
  comm_.check_stop();
  const double t0 = now_s();
  auto it = index_of_.find(leaf.impl_ptr().get());
  if (it == index_of_.end() || taken_[it->second]) return;  // not one of ours
  take(it->second);
  start_ready_buckets();
  progress();
  times_.in_backward += now_s() - t0;
}

// Adds parameter p's gradient of this pass into the partial sums (zeros if it got none), then
// drops it.
void GradReducer::take(size_t p) {
  Tensor& t = params_[p];
  const Tensor g = t.grad();
  const float* src = nullptr;
  if (g.defined()) {
    HEED_CHECK(g.dtype() == DType::f32 && g.shape() == t.shape() && g.is_contiguous(), "GradReducer: parameter ", p,
               "'s gradient is not a contiguous float32 tensor of its shape");
    src = g.data<float>();
  }
  std::vector<float*> stack(stack_.size());
  for (size_t e = 0; e < stack_.size(); ++e) stack[e] = stack_[e].data<float>() + offset_[p];
  push_merge(stack.data(), depth_, local_plan_.merges[pass_], src, t.numel());
  t.zero_grad();
  taken_[p] = 1;
  if (pass_ + 1 == mine_.size())
    for (size_t b : buckets_of_[p]) --buckets_[b].pending;
}

void GradReducer::start_ready_buckets() {
  while (next_start_ < buckets_.size() && buckets_[next_start_].pending == 0) start(next_start_++);
}

// Sends this rank's partial sums of every other rank's shard of bucket b, and receives theirs of
// its own shard.
void GradReducer::start(size_t b) {
  Bucket& k = buckets_[b];
  k.phase = 1;
  const int tag = tag_of(b, 1);
  for (int s = 0; s < size_; ++s) {
    const Span theirs = shard(k, s);
    if (s == rank_ || theirs.size() == 0) continue;
    for (int e = 0; e < partial_sums_of_[rank_]; ++e) {
      k.requests.push_back(comm_.send(stack_[e].data<float>() + theirs.lo, theirs.size(), s, tag));
      times_.bytes_sent += theirs.size() * 4;
    }
  }
  const Span mine = shard(k, rank_);
  if (mine.size() == 0) return;
  size_t j = 0;
  for (int q = 0; q < size_; ++q)
    for (int e = 0; e < partial_sums_of_[q]; ++e, ++j)
      if (q != rank_) k.requests.push_back(comm_.recv(inbox_[j].data<float>() + k.packed, mine.size(), q, tag));
}

// Every partial sum of this rank's shard of bucket b has arrived: adds them in the tree's order,
// divides by A, and sends the result to every other rank (receiving theirs).
void GradReducer::reduce_and_share(size_t b) {
  Bucket& k = buckets_[b];
  const Span mine = shard(k, rank_);
  float* result = result_.data<float>();
  if (mine.size() > 0) {
    std::vector<const float*> sources;
    size_t j = 0;
    for (int q = 0; q < size_; ++q)
      for (int e = 0; e < partial_sums_of_[q]; ++e, ++j)
        sources.push_back(q == rank_ ? stack_[e].data<float>() + mine.lo : inbox_[j].data<float>() + k.packed);
    tree_sum(global_plan_, sources, mine.size(), result + mine.lo, static_cast<float>(options_.micro_batches));
  }
  k.phase = 2;
  const int tag = tag_of(b, 2);
  for (int s = 0; s < size_; ++s) {
    if (s == rank_) continue;
    if (mine.size() > 0) {
      k.requests.push_back(comm_.send(result + mine.lo, mine.size(), s, tag));
      times_.bytes_sent += mine.size() * 4;
    }
    const Span theirs = shard(k, s);
    if (theirs.size() > 0) k.requests.push_back(comm_.recv(result + theirs.lo, theirs.size(), s, tag));
  }
}

// Tests the transfers of every started bucket and moves buckets whose transfers are done to their
// next phase. Returns whether any bucket moved.
bool GradReducer::progress() {
  bool moved = false;
  for (size_t b = 0; b < next_start_; ++b) {
    Bucket& k = buckets_[b];
    if (k.phase == 0 || k.phase == 3) continue;
    auto& r = k.requests;
    r.erase(std::remove_if(r.begin(), r.end(), [&](Request q) { return comm_.test(q); }), r.end());
    if (!r.empty()) continue;
    if (k.phase == 1) reduce_and_share(b);
    else k.phase = 3;
    moved = true;
  }
  return moved;
}

void GradReducer::finish_step() {
  if (plain()) return;
  HEED_CHECK(pass_ == mine_.size(), "GradReducer::finish_step: called after ", pass_, " of this rank's ",
             mine_.size(), " micro-batches");
  const double t0 = now_s();
  float* result = result_.data<float>();
  if (size_ == 1) {
    const float* root = stack_[0].data<float>();  // the stack ends in the tree's root
    const float divisor = static_cast<float>(options_.micro_batches);
    for (int64_t i = 0; i < total_; ++i) result[i] = root[i] / divisor;
  } else {
    for (;;) {
      progress();
      auto waiting = std::find_if(buckets_.begin(), buckets_.end(), [](const Bucket& b) { return b.phase != 3; });
      if (waiting == buckets_.end()) break;
      if (!waiting->requests.empty()) {
        comm_.wait(waiting->requests.front());
        waiting->requests.erase(waiting->requests.begin());
      }
    }
  }
  for (size_t p = 0; p < params_.size(); ++p)
    params_[p].impl().grad =
        make_view(result_, params_[p].shape(), contiguous_strides(params_[p].shape()), offset_[p]).impl_ptr();
  pass_ = 0;
  depth_ = 0;
  times_.finish = now_s() - t0;
  last_times_ = times_;
}

double GradReducer::mean_loss(const std::vector<double>& local_losses) {
  HEED_CHECK(static_cast<int64_t>(local_losses.size()) == mine_.size(), "GradReducer::mean_loss: ",
             local_losses.size(), " losses for this rank's ", mine_.size(), " micro-batches");
  const int64_t A = options_.micro_batches;
  if (A == 1 && size_ == 1) return local_losses[0];
  const std::vector<char> bytes = comm_.all_gather(local_losses.data(), local_losses.size() * sizeof(double));
  std::vector<double> all(A);
  std::memcpy(all.data(), bytes.data(), all.size() * sizeof(double));
  std::vector<Span> leaves;
  std::vector<const double*> sources;
  for (int64_t i = 0; i < A; ++i) {
    leaves.push_back({i, i + 1});
    sources.push_back(&all[i]);
  }
  double mean = 0;
  tree_sum(plan_merges(tree_, leaves), sources, 1, &mean, static_cast<double>(A));
  return mean;
}

}  // namespace heed::dist
