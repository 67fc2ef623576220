// `tmem train fashion-mnist`: trains the ViT family (models/vit.h) on
// Fashion-MNIST, for classification (test accuracy per method) or MAE-style
// masked patch reconstruction (PSNR and SSIM per method and mask ratio).
#pragma once

namespace tmem::tools {

/// Runs `tmem train fashion-mnist [flags]`; argv[0] is "fashion-mnist" (the
/// words before it are the caller's). Returns the process exit code (0 on
/// success, 1 on an error, CLI11's codes for bad flags and --help).
int run_train_fashion_mnist(int argc, char** argv);

}  // namespace tmem::tools
