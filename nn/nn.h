// heed::nn: the umbrella header for layers and models. `#include "nn/nn.h"`.
#pragma once

#include "core/heed.h"
#include "nn/activation.h"
#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/gpt.h"
#include "nn/init.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/positional.h"
#include "nn/safetensors.h"
#include "nn/transformer.h"
