// RAII for libgit2: every handle has one owner that frees it, and a failed call
// becomes a forge::Error carrying libgit2's own message, so callers never
// repeat cleanup on error paths.
#pragma once

#include <git2.h>

#include <memory>
#include <string>

#include "util/error.h"

namespace forge::git {

// libgit2 must be initialised while any handle lives; init/shutdown are
// reference-counted, so every public entry point holds one of these.
class Library {
 public:
  Library() { git_libgit2_init(); }
  ~Library() { git_libgit2_shutdown(); }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
};

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};

using Repository = std::unique_ptr<git_repository, Deleter<git_repository, git_repository_free>>;
using Reference = std::unique_ptr<git_reference, Deleter<git_reference, git_reference_free>>;
using Object = std::unique_ptr<git_object, Deleter<git_object, git_object_free>>;
using Commit = std::unique_ptr<git_commit, Deleter<git_commit, git_commit_free>>;
using Tree = std::unique_ptr<git_tree, Deleter<git_tree, git_tree_free>>;
using TreeBuilder =
    std::unique_ptr<git_treebuilder, Deleter<git_treebuilder, git_treebuilder_free>>;
using Signature = std::unique_ptr<git_signature, Deleter<git_signature, git_signature_free>>;
using Revwalk = std::unique_ptr<git_revwalk, Deleter<git_revwalk, git_revwalk_free>>;
using Diff = std::unique_ptr<git_diff, Deleter<git_diff, git_diff_free>>;

// Throws Error("<what>: <libgit2's message>") when rc < 0; returns rc otherwise.
inline int check(int rc, const std::string& what) {
  if (rc >= 0) return rc;
  const git_error* e = git_error_last();
  throw Error(what + ": " + (e && e->message ? e->message : "libgit2 error " + std::to_string(rc)));
}

inline std::string hex(const git_oid& oid) {
  char buf[GIT_OID_HEXSZ + 1];
  git_oid_tostr(buf, sizeof buf, &oid);
  return buf;
}

}  // namespace forge::git
