// heed: the umbrella header. `#include <core/heed.h>` (installed: <heed/core/heed.h> via the
// include directory the heed::heed target adds) gives tensors, autograd, ops and gradcheck.
#pragma once

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/gradcheck.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/random.h"
#include "core/tensor.h"
