"""What forge's build said about one problem: per target its selection and
reason, the shipped kernel and its own timings (the evaluation record the
worker wrote for that kernel: candidate_us, eager_us with spreads, the copy
ceiling it measured), and, when nothing ships, forge's own reason."""
import json
import os


def store_records(store):
    """Every JSON object in the store (records are objects: 20 header bytes, then JSON)."""
    for root, _, files in os.walk(os.path.join(store, "objects")):
        for f in files:
            try:
                rec = json.loads(open(os.path.join(root, f), "rb").read()[20:])
            except (ValueError, UnicodeDecodeError, OSError):
                continue
            if isinstance(rec, dict):
                yield rec


def evaluations_by_source(store):
    """{source digest: evaluation record with a bench}, accepted ones first."""
    out = {}
    for rec in store_records(store):
        if "candidate" in rec and "verdict" in rec and isinstance(rec.get("bench"), dict):
            src = rec.get("source")
            if isinstance(src, str) and (src not in out or rec["verdict"] == "accepted"):
                out[src] = rec
    return out


def shipped_entries(store):
    """{target id: package.json entry} of the package the build left, or {}."""
    try:
        return {e["target"]: e for e in json.load(open(os.path.join(store, "package", "package.json")))["entries"]}
    except (OSError, ValueError, KeyError):
        return {}


def timing(b, key):
    v = b.get(key)
    return {"median": v.get("median"), "spread": v.get("spread")} if isinstance(v, dict) else None


def target_rows(report, store):
    """One row per target forge took (selected or not, in its rank order)."""
    evals = evaluations_by_source(store) if os.path.isdir(store) else {}
    shipped = shipped_entries(store)
    rows = []
    for t in report.get("targets", []):
        rec = evals.get(t.get("best_source")) or {}
        b = rec.get("bench") or {}
        entry = shipped.get(t["id"])
        rows.append({
            "target": t["id"], "op": t.get("op"), "signature": t.get("signature"),
            "share_pct": 100 * t["share"] if t.get("share") is not None else None,
            "selection": t.get("selection"), "why": t.get("why"),
            "iterations": t.get("iterations"), "best_iteration": t.get("best_iteration"),
            "outcomes": t.get("outcomes"), "rejections": t.get("rejections") or None,
            "kernel": t.get("best_strategy"), "shipped": entry is not None,
            "candidate_us": timing(b, "candidate_us"), "eager_us": timing(b, "eager_us"),
            "compile_us": None if t.get("compile_us") is None else {"median": t["compile_us"], "spread": None},
            "compile_mode": t.get("compile_mode"),
            "speedup": {"eager": t.get("best_speedup_eager"), "eager_hot": t.get("best_hot_speedup_eager"),
                        "compile": t.get("best_speedup_compile")},
            "bytes": t.get("bytes"), "floor_us": t.get("floor_us"), "floor_pct": t.get("floor_pct"),
            "ceiling_bytes_per_s": b.get("ceiling_bytes_per_s"), "under_compile": t.get("under_compile")})
    # A shipped chain stands in for the problem's whole forward: it leads.
    chains = chain_rows(report, shipped)
    return [r for r in chains if r["shipped"]] + rows + [r for r in chains if not r["shipped"]]


def chain_rows(report, shipped):
    """One row per chain forge searched (docs/SELECTION.md, "Chains"): its fused
    kernel's figures from the build report; shipped when the package holds it
    (in place of the module forward it is)."""
    rows = []
    for c in report.get("chains", []):
        s = c.get("search")
        if not c.get("id") or not isinstance(s, dict):
            continue
        rows.append({
            "target": c["id"], "op": " -> ".join(c.get("ops", [])), "signature": None,
            "share_pct": 100 * c["share"] if c.get("share") is not None else None,
            "selection": "selected", "why": c.get("why"),
            "iterations": s.get("iterations"), "best_iteration": None,
            "outcomes": s.get("outcomes"), "rejections": None,
            "kernel": s.get("best_strategy"), "shipped": c["id"] in shipped,
            "candidate_us": None, "eager_us": None, "compile_us": None, "compile_mode": None,
            "speedup": {"eager": s.get("best_speedup_eager"), "eager_hot": None, "compile": None},
            "bytes": None, "floor_us": None, "floor_pct": None, "ceiling_bytes_per_s": None,
            "under_compile": None, "chain": True})
    return rows


def copy_ceiling(report):
    """Bytes/s: the copy ceiling forge's capture measured on this device."""
    for m in (report.get("models") or {}).values():
        if m.get("copy_ceiling_gbps"):
            return m["copy_ceiling_gbps"] * 1e9
    return None


def reason(report, rows, rc, stderr):
    """Why no forged kernel ships for this problem, in forge's words; None when one does."""
    if report is None:
        return "forge build rc=%s, no report: %s" % (rc, (stderr or "").strip()[-300:])
    if any(r["shipped"] for r in rows):
        return None
    for name, m in (report.get("models") or {}).items():
        if m.get("status") == "failed":
            return "capture failed: %s %s" % (m.get("reason", ""), (m.get("detail") or "")[:300])
    if not rows:
        counts = {}
        for m in (report.get("models") or {}).values():
            counts.update(m.get("not_selected") or {})
        return "no target: every captured op not selected %s" % json.dumps(counts, sort_keys=True)
    top = rows[0]
    if top["selection"] != "selected":
        return "%s: %s" % (top["selection"], top["why"] or "")
    stopped = ["interrupted at the time limit"] if report.get("interrupted") else []
    if not top["kernel"]:
        # The search's own notes on this target (a worker that did not build, a failed search).
        notes = [n for n in report.get("notes", []) if top["target"] in n or "worker" in n]
        return "; ".join(stopped + ["no kernel accepted in %s iterations: outcomes %s%s" % (
            top["iterations"], json.dumps(top["outcomes"], sort_keys=True),
            " rejections " + json.dumps(top["rejections"], sort_keys=True) if top["rejections"] else "")] + notes)
    notes = [n for n in report.get("notes", []) if n.startswith("package:")]
    return "; ".join(stopped + notes) or "not shipped (no package note)"
