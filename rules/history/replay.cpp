#include "rules/history/replay.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "rules/history/git_handle.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kResultFile = "result.json";

git::Repository open_repo(const fs::path& path) {
  git_repository* raw = nullptr;
  git::check(git_repository_open_ext(&raw, path.c_str(), 0, nullptr),
             "cannot open the git repository " + path.string());
  return git::Repository(raw);
}

git::Commit commit_of(git_repository* repo, const std::string& rev) {
  git_object* raw = nullptr;
  git::check(git_revparse_single(&raw, repo, rev.c_str()), "unknown revision '" + rev + "'");
  git::Object obj(raw);
  git_object* peeled = nullptr;
  git::check(git_object_peel(&peeled, obj.get(), GIT_OBJECT_COMMIT),
             "'" + rev + "' does not name a commit");
  return git::Commit(reinterpret_cast<git_commit*>(peeled));
}

git::Tree tree_of(git_commit* c) {
  git_tree* raw = nullptr;
  git::check(git_commit_tree(&raw, c), "cannot read the tree of " + git::hex(*git_commit_id(c)));
  return git::Tree(raw);
}

std::string blob_text(git_repository* repo, const git_oid& oid) {
  git_blob* raw = nullptr;
  git::check(git_blob_lookup(&raw, repo, &oid), "cannot read blob " + git::hex(oid));
  std::unique_ptr<git_blob, git::Deleter<git_blob, git_blob_free>> blob(raw);
  return std::string(static_cast<const char*>(git_blob_rawcontent(blob.get())),
                     static_cast<size_t>(git_blob_rawsize(blob.get())));
}

// The oid of tree entry `path`, nullopt when absent.
std::optional<git_oid> entry_oid(git_tree* tree, const std::string& path) {
  git_tree_entry* raw = nullptr;
  int rc = git_tree_entry_bypath(&raw, tree, path.c_str());
  if (rc == GIT_ENOTFOUND) return std::nullopt;
  git::check(rc, "cannot read " + path);
  git_oid oid = *git_tree_entry_id(raw);
  git_tree_entry_free(raw);
  return oid;
}

// The same "key: value" reading as repo.cpp's, for commits read here.
HistoryCommit describe(git_commit* c) {
  const std::string message = git_commit_message(c);
  HistoryCommit h{git::hex(*git_commit_id(c)), message.substr(0, message.find('\n')), {}};
  std::istringstream in(message);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    size_t colon = line.find(": ");
    if (colon == std::string::npos || colon == 0) continue;
    std::string key = line.substr(0, colon);
    if (key.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") != std::string::npos) continue;
    h.fields.emplace(key, line.substr(colon + 2));
  }
  return h;
}

// The kernel in one target folder's tree.
std::optional<HistoryKernel> read_folder(git_repository* repo, git_tree* folder,
                                         const std::string& target) {
  HistoryKernel k;
  k.target = target;
  k.result = nullptr;
  const size_t n = git_tree_entrycount(folder);  // sorted by name
  for (size_t i = 0; i < n; ++i) {
    const git_tree_entry* e = git_tree_entry_byindex(folder, i);
    if (git_tree_entry_type(e) != GIT_OBJECT_BLOB) continue;
    const std::string name = git_tree_entry_name(e);
    if (name == kResultFile)
      k.result = json::parse(blob_text(repo, *git_tree_entry_id(e)), nullptr, false);
    else if (k.file.empty()) {
      k.file = name;
      k.source = blob_text(repo, *git_tree_entry_id(e));
    }
  }
  if (k.file.empty()) return std::nullopt;
  if (k.result.is_discarded()) k.result = nullptr;
  return k;
}

git::Tree subtree(git_repository* repo, git_tree* root, const std::string& path) {
  auto oid = entry_oid(root, path);
  if (!oid) return git::Tree(nullptr);
  git_tree* raw = nullptr;
  if (git_tree_lookup(&raw, repo, &*oid) != 0) return git::Tree(nullptr);  // not a tree
  return git::Tree(raw);
}

}  // namespace

HistoryCommit resolve_commit(const fs::path& path, const std::string& rev) {
  git::Library lib;
  git::Repository repo = open_repo(path);
  return describe(commit_of(repo.get(), rev).get());
}

std::vector<HistoryKernel> kernels_at(const fs::path& path, const std::string& rev) {
  git::Library lib;
  git::Repository repo = open_repo(path);
  git::Commit c = commit_of(repo.get(), rev);
  git::Tree root = tree_of(c.get());
  std::vector<HistoryKernel> out;
  // kernels/<model>/<op>/<sig6>/: three levels of folders.
  std::function<void(git_tree*, const std::string&, int)> walk = [&](git_tree* t,
                                                                     const std::string& prefix,
                                                                     int depth) {
    const size_t n = git_tree_entrycount(t);
    for (size_t i = 0; i < n; ++i) {
      const git_tree_entry* e = git_tree_entry_byindex(t, i);
      if (git_tree_entry_type(e) != GIT_OBJECT_TREE) continue;
      const std::string name = prefix + git_tree_entry_name(e);
      git_tree* raw = nullptr;
      git::check(git_tree_lookup(&raw, repo.get(), git_tree_entry_id(e)), "cannot read " + name);
      git::Tree sub(raw);
      if (depth == 2) {
        if (auto k = read_folder(repo.get(), sub.get(), name)) out.push_back(std::move(*k));
      } else {
        walk(sub.get(), name + "/", depth + 1);
      }
    }
  };
  git::Tree kernels = subtree(repo.get(), root.get(), "kernels");
  if (kernels) walk(kernels.get(), "", 0);
  return out;
}

std::optional<HistoryKernel> kernel_at(const fs::path& path, const std::string& rev,
                                       const std::string& target) {
  git::Library lib;
  git::Repository repo = open_repo(path);
  git::Commit c = commit_of(repo.get(), rev);
  git::Tree root = tree_of(c.get());
  git::Tree folder = subtree(repo.get(), root.get(), "kernels/" + target);
  if (!folder) return std::nullopt;
  return read_folder(repo.get(), folder.get(), target);
}

std::vector<HistoryCommit> commits_changing(const fs::path& path, const std::string& ref,
                                            const std::string& target) {
  git::Library lib;
  git::Repository repo = open_repo(path);
  std::vector<HistoryCommit> out;
  git_oid tip;
  int rc = git_reference_name_to_id(&tip, repo.get(), ref.c_str());
  if (rc == GIT_ENOTFOUND) return out;
  git::check(rc, "cannot read " + ref);
  git_revwalk* raw = nullptr;
  git::check(git_revwalk_new(&raw, repo.get()), "cannot walk the history");
  git::Revwalk walk(raw);
  git_revwalk_simplify_first_parent(walk.get());
  git::check(git_revwalk_push(walk.get(), &tip), "cannot walk the history");
  const std::string folder = "kernels/" + target;
  git_oid oid;
  while (git_revwalk_next(&oid, walk.get()) == 0) {
    git_commit* c_raw = nullptr;
    git::check(git_commit_lookup(&c_raw, repo.get(), &oid), "cannot read commit " + git::hex(oid));
    git::Commit c(c_raw);
    git::Tree tree = tree_of(c.get());
    std::optional<git_oid> now = entry_oid(tree.get(), folder), before;
    if (git_commit_parentcount(c.get()) > 0) {
      git_commit* p_raw = nullptr;
      git::check(git_commit_parent(&p_raw, c.get(), 0),
                 "cannot read the parent of " + git::hex(oid));
      git::Commit parent(p_raw);
      git::Tree ptree = tree_of(parent.get());
      before = entry_oid(ptree.get(), folder);
    }
    const bool same =
        now.has_value() == before.has_value() && (!now || git_oid_equal(&*now, &*before));
    if (!same && now) out.push_back(describe(c.get()));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

bool timing_changed(const BenchTime& recorded, const BenchTime& now) {
  const double gap =
      recorded.median > now.median ? recorded.median - now.median : now.median - recorded.median;
  return gap > recorded.spread + now.spread;
}

size_t first_true(size_t n, const std::function<bool(size_t)>& pred) {
  size_t lo = 0, hi = n;  // pred is false below lo, true from hi
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (pred(mid))
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

bool rejected_on_case(const json& rec, const std::string& name) {
  if (!rec.is_object() || rec.value("verdict", "") != "rejected") return false;
  const std::string detail = rec.value("detail", "");
  const std::string needle = "on case " + name;
  for (size_t at = detail.find(needle); at != std::string::npos; at = detail.find(needle, at + 1)) {
    const size_t end = at + needle.size();
    if (end == detail.size() || detail[end] == ':' || detail[end] == ' ' || detail[end] == ',')
      return true;
  }
  return false;
}

}  // namespace forge
