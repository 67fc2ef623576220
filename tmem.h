// The umbrella header of an installed tmem: #include <tmem/tmem.h> gives
// tensors, autograd, the op library, the nn modules, containers,
// optimizers and DataLoader, the thread count, training over several
// processes (dist/), the dataset readers and the models. The training loops
// of the tmem program
// (models/*_trainer.h) are left out; include them as <tmem/models/...>.
#pragma once
#include "tmem/core/autograd.h"
#include "tmem/core/device_backend.h"
#include "tmem/core/error.h"
#include "tmem/core/grad_hooks.h"
#include "tmem/core/parallel.h"
#include "tmem/core/rng.h"
#include "tmem/core/safetensors.h"
#include "tmem/core/tensor.h"
#include "tmem/data/brown.h"
#include "tmem/data/idx.h"
#include "tmem/data/moving_fmnist.h"
#include "tmem/dist/ddp.h"
#include "tmem/dist/dist.h"
#include "tmem/dist/sampler.h"
#include "tmem/models/diagnostic.h"
#include "tmem/models/image_metrics.h"
#include "tmem/models/lm.h"
#include "tmem/models/tasks.h"
#include "tmem/models/transformer.h"
#include "tmem/models/video.h"
#include "tmem/models/vit.h"
#include "tmem/nn/container.h"
#include "tmem/nn/data_loader.h"
#include "tmem/nn/layers.h"
#include "tmem/nn/linear.h"
#include "tmem/nn/module.h"
#include "tmem/nn/optim.h"
#include "tmem/nn/patch_embed.h"
#include "tmem/nn/recurrent.h"
#include "tmem/nn/slot_memory.h"
#include "tmem/nn/tensor_memory.h"
#include "tmem/ops/ops.h"
