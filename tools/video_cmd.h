// `tmem train moving-fmnist`: trains the video models (models/video.h) on
// Moving Fashion-MNIST clips to say which two items are in a clip, with and
// without an occluder over one item at the end of the clip, and reports the
// set accuracy per method and occlusion setting.
#pragma once

namespace tmem::tools {

/// Runs `tmem train moving-fmnist [flags]`; argv[0] is "moving-fmnist" (the
/// words before it are the caller's). Returns the process exit code (0 on
/// success, 1 on an error, CLI11's codes for bad flags and --help).
int run_train_moving_fmnist(int argc, char** argv);

}  // namespace tmem::tools
