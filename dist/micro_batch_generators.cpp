#include "dist/micro_batch_generators.h"

#include "core/check.h"

namespace heed::dist {

MicroBatchGenerators::MicroBatchGenerators(std::vector<Generator*> generators, int64_t micro_batches, int processes)
    : generators_(std::move(generators)), micro_batches_(micro_batches), reseed_(micro_batches > 1 || processes > 1) {
  HEED_CHECK(micro_batches >= 1 && processes >= 1, "MicroBatchGenerators: needs at least one micro-batch and one "
             "process, got ", micro_batches, " and ", processes);
}

void MicroBatchGenerators::begin_micro_batch(int64_t i) {
  HEED_CHECK(i >= 0 && i < micro_batches_, "MicroBatchGenerators: micro-batch ", i, " is outside [0, ",
             micro_batches_, ")");
  if (!reseed_) return;
  if (!in_step_) {  // the step's first micro-batch on this rank: the generators are as the step found them
    step_seed_.clear();
    for (const Generator* g : generators_) {
      uint64_t digest = 0;
      for (uint64_t word : g->state()) digest = derive_seed(digest ^ word, 1);
      step_seed_.push_back(digest);
    }
    in_step_ = true;
  }
  for (size_t k = 0; k < generators_.size(); ++k) generators_[k]->seed_(derive_seed(step_seed_[k], i));
}

void MicroBatchGenerators::end_step() {
  if (!reseed_) return;
  HEED_CHECK(in_step_, "MicroBatchGenerators::end_step: no micro-batch began in this step");
  // Stream A of the step's seed: no micro-batch of this step used it.
  for (size_t k = 0; k < generators_.size(); ++k) generators_[k]->seed_(derive_seed(step_seed_[k], micro_batches_));
  in_step_ = false;
}

}  // namespace heed::dist
