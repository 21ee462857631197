#include "rules/history/repo.h"

#include <cstdlib>
#include <ctime>
#include <set>
#include <sstream>

#include "rules/history/git_handle.h"
#include "util/hash.h"

namespace forge {
namespace fs = std::filesystem;

namespace {

const char* kResultFile = "result.json";

bool is_missing_or_empty(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return true;
  return fs::is_directory(p, ec) && fs::is_empty(p, ec);
}

// `path` may be a working tree, a folder inside one, a git folder or a bare
// repository; a path with nothing there yet becomes a bare repository.
git::Repository open_or_init(fs::path path) {
  path = path.lexically_normal();  // "x/new/.." must not become a repository at x
  git_repository* raw = nullptr;
  int rc = git_repository_open_ext(&raw, path.c_str(), 0, nullptr);
  if (rc == GIT_ENOTFOUND && is_missing_or_empty(path)) {
    git::check(git_repository_init(&raw, path.c_str(), /*is_bare=*/1),
               "cannot create the history repository " + path.string());
    return git::Repository(raw);
  }
  if (rc == GIT_ENOTFOUND) throw Error(path.string() + " is not a git repository");
  git::check(rc, "cannot open the git repository " + path.string());
  return git::Repository(raw);
}

git::Repository open_existing(const fs::path& path) {
  git_repository* raw = nullptr;
  git::check(git_repository_open_ext(&raw, path.c_str(), 0, nullptr),
             "cannot open the git repository " + path.string());
  return git::Repository(raw);
}

// Moving a checked-out branch would make the user's working tree look changed.
void refuse_checked_out(git_repository* repo, const std::string& ref) {
  if (git_repository_is_bare(repo)) return;
  git_reference* raw = nullptr;
  if (git_reference_lookup(&raw, repo, "HEAD") != 0) return;
  git::Reference head(raw);
  if (git_reference_type(head.get()) == GIT_REFERENCE_SYMBOLIC &&
      ref == git_reference_symbolic_target(head.get()))
    throw Error(ref + " is checked out in " + fs::path(git_repository_workdir(repo)).string() +
                ": forge will not move it under your working tree; check out another branch");
}

std::optional<git_oid> ref_target(git_repository* repo, const std::string& ref) {
  git_oid oid;
  int rc = git_reference_name_to_id(&oid, repo, ref.c_str());
  if (rc == GIT_ENOTFOUND) return std::nullopt;
  git::check(rc, "cannot read " + ref);
  return oid;
}

std::map<std::string, std::string> parse_fields(const std::string& message) {
  std::map<std::string, std::string> fields;
  std::istringstream in(message);
  std::string line;
  std::getline(in, line);  // the subject
  while (std::getline(in, line)) {
    size_t colon = line.find(": ");
    if (colon == std::string::npos || colon == 0) continue;
    std::string key = line.substr(0, colon);
    if (key.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") != std::string::npos) continue;
    fields.emplace(key, line.substr(colon + 2));
  }
  return fields;
}

std::string subject_of(const std::string& message) {
  return message.substr(0, message.find('\n'));
}

// Calls fn(commit) from `tip` back through first parents.
template <class Fn>
void walk_first_parents(git_repository* repo, const git_oid& tip, Fn fn) {
  git_revwalk* raw = nullptr;
  git::check(git_revwalk_new(&raw, repo), "cannot walk the history");
  git::Revwalk walk(raw);
  git_revwalk_simplify_first_parent(walk.get());
  git::check(git_revwalk_push(walk.get(), &tip), "cannot walk the history");
  git_oid oid;
  while (git_revwalk_next(&oid, walk.get()) == 0) {
    git_commit* c = nullptr;
    git::check(git_commit_lookup(&c, repo, &oid), "cannot read commit " + git::hex(oid));
    fn(git::Commit(c));
  }
}

std::string entry_key(const std::string& target, const std::string& source_sha) {
  return target + "\n" + source_sha;
}

void check_entry(const HistoryEntry& e) {
  const std::string& f = e.file;
  if (f.empty() || f == "." || f == ".." || f == kResultFile ||
      f.find_first_of(std::string("/\\\0", 3)) != std::string::npos)
    throw Error("history: bad kernel file name '" + f + "' for " + e.target);
  std::string t = "/" + e.target + "/";
  if (e.target.empty() || t.find("//") != std::string::npos ||
      t.find("/../") != std::string::npos || t.find("/./") != std::string::npos)
    throw Error("history: bad target id '" + e.target + "'");
}

std::optional<int64_t> source_date_epoch() {
  const char* v = std::getenv("SOURCE_DATE_EPOCH");
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long long t = std::strtoll(v, &end, 10);
  if (*end != '\0' || t < 0) return std::nullopt;
  return t;
}

git::Signature make_signature(git_repository* repo, const std::optional<GitAuthor>& author) {
  std::string name = "forge", email = "forge@localhost";
  std::optional<int64_t> time = source_date_epoch();
  int offset = 0;
  git_signature* raw = nullptr;
  if (author) {
    name = author->name;
    email = author->email;
    if (author->time) time = author->time;
  } else if (git_signature_default(&raw, repo) == 0) {
    git::Signature config(raw);
    name = config->name;
    email = config->email;
    if (!time) {
      time = config->when.time;
      offset = config->when.offset;
    }
  }
  if (!time) time = static_cast<int64_t>(std::time(nullptr));
  git::check(git_signature_new(&raw, name.c_str(), email.c_str(), *time, offset),
             "bad committer '" + name + " <" + email + ">'");
  return git::Signature(raw);
}

git_oid write_blob(git_repository* repo, const std::string& bytes) {
  git_oid oid;
  git::check(git_blob_create_from_buffer(&oid, repo, bytes.data(), bytes.size()),
             "cannot write a blob");
  return oid;
}

// The target's folder: the kernel source and result.json.
git_oid write_target_tree(git_repository* repo, const HistoryEntry& e) {
  git_treebuilder* raw = nullptr;
  git::check(git_treebuilder_new(&raw, repo, nullptr), "cannot build a tree");
  git::TreeBuilder bld(raw);
  git_oid src = write_blob(repo, e.source);
  git_oid res = write_blob(repo, e.result.dump(2) + "\n");
  git::check(git_treebuilder_insert(nullptr, bld.get(), e.file.c_str(), &src, GIT_FILEMODE_BLOB),
             "cannot add " + e.file);
  git::check(git_treebuilder_insert(nullptr, bld.get(), kResultFile, &res, GIT_FILEMODE_BLOB),
             "cannot add result.json");
  git_oid oid;
  git::check(git_treebuilder_write(&oid, bld.get()), "cannot write a tree");
  return oid;
}

git::Tree lookup_tree(git_repository* repo, const git_oid& oid) {
  git_tree* raw = nullptr;
  git::check(git_tree_lookup(&raw, repo, &oid), "cannot read tree " + git::hex(oid));
  return git::Tree(raw);
}

git::Tree empty_tree(git_repository* repo) {
  git_treebuilder* raw = nullptr;
  git::check(git_treebuilder_new(&raw, repo, nullptr), "cannot build a tree");
  git::TreeBuilder bld(raw);
  git_oid oid;
  git::check(git_treebuilder_write(&oid, bld.get()), "cannot write a tree");
  return lookup_tree(repo, oid);
}

std::string commit_message(const HistoryEntry& e, const std::string& source_sha) {
  std::string m = "forge: " + e.target + " " + e.summary + "\n\ntarget: " + e.target + "\n";
  for (const auto& [k, v] : e.fields) m += k + ": " + v + "\n";
  return m + "source: " + source_sha + "\n";
}

}  // namespace

fs::path locate_history_repo(const Manifest& m, bool create) {
  git::Library lib;
  std::error_code ec;
  if (!m.history.repo.empty())
    return create || fs::exists(m.history.repo, ec) ? m.history.repo : fs::path();
  git_buf buf = GIT_BUF_INIT;
  if (git_repository_discover(&buf, m.dir.c_str(), /*across_fs=*/0, nullptr) == 0) {
    fs::path found = buf.ptr;
    git_buf_dispose(&buf);
    return found;
  }
  fs::path own = m.store / "history.git";
  if (create || fs::exists(own, ec)) return own;
  return {};
}

HistoryResult commit_history(const fs::path& path, const std::string& ref,
                             const std::vector<HistoryEntry>& entries,
                             const std::optional<GitAuthor>& author) {
  git::Library lib;
  for (const auto& e : entries) check_entry(e);
  git::Repository repo = open_or_init(path);
  HistoryResult result;
  result.repo = fs::path(git_repository_path(repo.get())).lexically_normal();
  result.ref = ref;
  refuse_checked_out(repo.get(), ref);

  std::optional<git_oid> tip = ref_target(repo.get(), ref);
  std::set<std::string> done;
  git::Tree tree = empty_tree(repo.get());
  if (tip) {
    walk_first_parents(repo.get(), *tip, [&](git::Commit c) {
      auto f = parse_fields(git_commit_message(c.get()));
      if (f.count("target") && f.count("source")) done.insert(entry_key(f["target"], f["source"]));
    });
    git_commit* raw = nullptr;
    git::check(git_commit_lookup(&raw, repo.get(), &*tip), "cannot read " + ref);
    git::Commit c(raw);
    tree = lookup_tree(repo.get(), *git_commit_tree_id(c.get()));
  }

  std::optional<git::Signature> sig;
  for (const auto& e : entries) {
    const std::string source_sha = sha256_hex(e.source);
    if (!done.insert(entry_key(e.target, source_sha)).second) continue;
    const std::string dir = "kernels/" + e.target;
    git_tree_update update{};
    update.action = GIT_TREE_UPDATE_UPSERT;
    update.id = write_target_tree(repo.get(), e);
    update.filemode = GIT_FILEMODE_TREE;
    update.path = dir.c_str();
    git_oid next;
    git::check(git_tree_create_updated(&next, repo.get(), tree.get(), 1, &update),
               "cannot update the tree for " + e.target);
    if (git_oid_equal(&next, git_tree_id(tree.get()))) continue;  // no empty commits
    git::Tree next_tree = lookup_tree(repo.get(), next);
    if (!sig) sig = make_signature(repo.get(), author);

    git::Commit parent;
    if (tip) {
      git_commit* raw = nullptr;
      git::check(git_commit_lookup(&raw, repo.get(), &*tip), "cannot read " + ref);
      parent.reset(raw);
    }
    const git_commit* parents[] = {parent.get()};
    git_oid commit;
    // update_ref moves only `ref`, and only if it still points at the parent.
    git::check(git_commit_create(&commit, repo.get(), ref.c_str(), sig->get(), sig->get(), nullptr,
                                 commit_message(e, source_sha).c_str(), next_tree.get(),
                                 parent ? 1 : 0, parents),
               "cannot commit " + e.target + " to " + ref);
    tip = commit;
    tree = std::move(next_tree);
    ++result.commits_added;
  }
  if (tip) result.tip = git::hex(*tip);
  return result;
}

std::vector<HistoryCommit> read_history(const fs::path& path, const std::string& ref) {
  git::Library lib;
  git::Repository repo = open_existing(path);
  std::vector<HistoryCommit> out;
  auto tip = ref_target(repo.get(), ref);
  if (!tip) return out;
  walk_first_parents(repo.get(), *tip, [&](git::Commit c) {
    const std::string message = git_commit_message(c.get());
    out.push_back({git::hex(*git_commit_id(c.get())), subject_of(message), parse_fields(message)});
  });
  return out;
}

namespace {

git::Tree tree_of(git_repository* repo, const std::string& rev) {
  git_object* raw = nullptr;
  git::check(git_revparse_single(&raw, repo, rev.c_str()), "unknown revision '" + rev + "'");
  git::Object obj(raw);
  git_object* peeled = nullptr;
  git::check(git_object_peel(&peeled, obj.get(), GIT_OBJECT_TREE),
             "'" + rev + "' does not name a commit or tree");
  return git::Tree(reinterpret_cast<git_tree*>(peeled));
}

int append_line(const git_diff_delta*, const git_diff_hunk*, const git_diff_line* line,
                void* payload) {
  auto* out = static_cast<std::string*>(payload);
  if (line->origin == GIT_DIFF_LINE_CONTEXT || line->origin == GIT_DIFF_LINE_ADDITION ||
      line->origin == GIT_DIFF_LINE_DELETION)
    *out += line->origin;
  out->append(line->content, line->content_len);
  return 0;
}

}  // namespace

std::string diff_history(const fs::path& path, const std::string& from, const std::string& to) {
  git::Library lib;
  git::Repository repo = open_existing(path);
  git::Tree a = tree_of(repo.get(), from), b = tree_of(repo.get(), to);
  git_diff_options opts = GIT_DIFF_OPTIONS_INIT;
  char pathspec[] = "kernels/";
  char* specs[] = {pathspec};
  opts.pathspec = {specs, 1};
  git_diff* raw = nullptr;
  git::check(git_diff_tree_to_tree(&raw, repo.get(), a.get(), b.get(), &opts),
             "cannot diff " + from + " and " + to);
  git::Diff diff(raw);
  std::string out;
  git::check(git_diff_print(diff.get(), GIT_DIFF_FORMAT_PATCH, append_line, &out),
             "cannot print the diff");
  return out;
}

}  // namespace forge
