// `tmem stream`: streams a language model over a long token stream (10^5,
// 10^6 tokens) and reports the memory it holds as the stream grows: Tensor
// Memory's state is fixed-size, a KV-cache transformer's grows with every
// token (issue 7, "memory held constant").
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace tmem::tools {

/// Adds the `stream` subcommand to app; returns the function to run after
/// parsing (it returns -1 when the subcommand was not given).
std::function<int()> add_stream_command(CLI::App& app);

}  // namespace tmem::tools
