// Brown corpus reader and the Bengio et al. 2003 split (see data/brown.h).
#include "data/brown.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unordered_map>

#include "core/error.h"

namespace tmem {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFetchHint = "run bash tools/fetch_brown.sh to fetch it into data/cache/brown";

bool is_corpus_name(const std::string& name) {
  auto lower = [](char c) { return c >= 'a' && c <= 'z'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return name.size() == 4 && name[0] == 'c' && lower(name[1]) && digit(name[2]) && digit(name[3]);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

std::vector<std::string> parse_brown_text(std::string_view text, const std::string& source) {
  std::vector<std::string> words;
  int64_t line = 1;
  size_t i = 0;
  while (i < text.size()) {
    if (is_space(text[i])) {
      if (text[i] == '\n') ++line;
      ++i;
      continue;
    }
    size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    std::string_view token = text.substr(start, i - start);
    size_t slash = token.rfind('/');
    check<IOError>(slash != std::string_view::npos, "brown: ", source, ":", line, ": token '",
                   token, "' has no /TAG (expected word/TAG tokens)");
    check<IOError>(slash > 0, "brown: ", source, ":", line, ": token '", token,
                   "' has an empty word before its /TAG");
    check<IOError>(slash + 1 < token.size(), "brown: ", source, ":", line, ": token '", token,
                   "' has an empty tag after its last /");
    words.emplace_back(token.substr(0, slash));
  }
  return words;
}

std::vector<std::string> brown_files(const std::string& dir) {
  std::error_code ec;
  check<IOError>(fs::is_directory(dir, ec), "brown: ", dir, ": no such folder (the Brown corpus is not fetched; ",
                 kFetchHint, ")");
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (is_corpus_name(name) && it->is_regular_file(type_ec)) names.push_back(name);
  }
  check<IOError>(!ec, "brown: ", dir, ": cannot list the folder (", ec.message(), ")");
  check<IOError>(!names.empty(), "brown: ", dir,
                 ": no corpus files (ca01 ... cr09) in the folder; ", kFetchHint);
  std::sort(names.begin(), names.end());
  std::vector<std::string> paths;
  paths.reserve(names.size());
  for (const std::string& n : names) paths.push_back((fs::path(dir) / n).string());
  return paths;
}

std::vector<std::string> read_brown_tokens(const std::string& dir) {
  std::vector<std::string> tokens;
  for (const std::string& path : brown_files(dir)) {
    std::ifstream in(path, std::ios::binary);
    check<IOError>(in.good(), "brown: ", path, ": cannot open the file");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    check<IOError>(!in.bad(), "brown: ", path, ": read error");
    std::vector<std::string> words = parse_brown_text(text, path);
    tokens.insert(tokens.end(), std::make_move_iterator(words.begin()),
                  std::make_move_iterator(words.end()));
  }
  return tokens;
}

BrownCorpus split_brown(const std::vector<std::string>& tokens, const BrownSplitOptions& opts) {
  check<ValueError>(opts.n_train >= 0 && opts.n_valid >= 0 && opts.max_rare_count >= 0,
                    "split_brown: expected n_train, n_valid and max_rare_count >= 0, but got ",
                    opts.n_train, ", ", opts.n_valid, " and ", opts.max_rare_count);
  const int64_t total = static_cast<int64_t>(tokens.size());
  check<ValueError>(total >= opts.n_train + opts.n_valid, "split_brown: expected at least ",
                    opts.n_train + opts.n_valid, " tokens (", opts.n_train, " train + ",
                    opts.n_valid, " valid), but got ", total);

  std::unordered_map<std::string, int64_t> counts;
  for (int64_t i = 0; i < opts.n_train; ++i) ++counts[tokens[i]];
  std::vector<std::pair<std::string, int64_t>> kept;
  for (const auto& [word, n] : counts) {
    if (n > opts.max_rare_count && word != kBrownUnk) kept.emplace_back(word, n);
  }
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });

  BrownCorpus out;
  out.vocab.reserve(kept.size() + 1);
  out.vocab.emplace_back(kBrownUnk);
  std::unordered_map<std::string, int64_t> id;
  id.reserve(kept.size());
  for (const auto& [word, n] : kept) {
    id.emplace(word, static_cast<int64_t>(out.vocab.size()));
    out.vocab.push_back(word);
  }
  auto encode = [&](int64_t begin, int64_t end, std::vector<int64_t>& dst) {
    dst.reserve(static_cast<size_t>(end - begin));
    for (int64_t i = begin; i < end; ++i) {
      auto it = id.find(tokens[i]);
      dst.push_back(it == id.end() ? 0 : it->second);
    }
  };
  encode(0, opts.n_train, out.train);
  encode(opts.n_train, opts.n_train + opts.n_valid, out.valid);
  encode(opts.n_train + opts.n_valid, total, out.test);
  out.total_tokens = total;
  return out;
}

BrownCorpus load_brown(const std::string& dir) {
  std::vector<std::string> tokens = read_brown_tokens(dir);
  const BrownSplitOptions opts;
  check<IOError>(static_cast<int64_t>(tokens.size()) >= opts.n_train + opts.n_valid, "brown: ",
                 dir, ": the corpus has ", tokens.size(), " tokens, fewer than the ",
                 opts.n_train + opts.n_valid, " of the Bengio et al. train + valid split (",
                 "is the download complete? ", kFetchHint, ")");
  return split_brown(tokens, opts);
}

}  // namespace tmem
