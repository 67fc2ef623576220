// `tmem train brown`: trains the language-model family (models/lm.h) on the
// Brown corpus and reports validation and test perplexity per method.
#pragma once

namespace tmem::tools {

/// Runs `tmem train brown [flags]`; argv[0] is "brown" (the words before it
/// are the caller's). Returns the process exit code (0 on success, 1 on an
/// error, CLI11's codes for bad flags and --help).
int run_train_brown(int argc, char** argv);

}  // namespace tmem::tools
