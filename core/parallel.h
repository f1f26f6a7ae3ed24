// heed: thread count. One setting drives OpenBLAS (every matmul and linear) and heed's own
// kernels, so a run can be pinned to a core budget in one place.
#pragma once

namespace heed {

/// Sets the threads used by OpenBLAS and by heed's own kernels (n >= 1); throws heed::Error otherwise.
void set_num_threads(int n);
/// The thread count last set, or OpenBLAS's own count (OPENBLAS_NUM_THREADS or the cores) if never set.
int num_threads();

}  // namespace heed
