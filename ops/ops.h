// Umbrella header: every op of the library.
#pragma once
#include "core/autograd.h"
#include "core/json_dump.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "ops/elementwise.h"
#include "ops/gradcheck.h"
#include "ops/linalg.h"
#include "ops/op_table.h"
#include "ops/reduction.h"
#include "ops/shape.h"
