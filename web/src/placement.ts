// Placement reports (docs/backends.md): where each op of a request ran, why, and what was rejected. This
// module draws them as a table (its parts also draw the Compute panel's preview) and keeps, for this page
// session, the latest report seen per op (any render the app fetched), so the Compute panel can show
// where each op actually ran last.
// Contract: only reports the server sent are shown; nothing here guesses a placement.
import { onPlacement, type Placement } from "./api";
import { el } from "./dom";
import { fmt, fmtBytes } from "./format";

/** Reasons that mean the op did not run where the user's constraints asked (a fallback). */
export function isFallback(p: Placement): boolean {
  return p.reason.startsWith("fallback");
}

/** A human sentence for a placement reason (the raw reason is kept beside it). */
export function reasonText(reason: string): string {
  switch (reason) {
    case "cheapest":
      return "lowest estimated cost";
    case "resident_data":
      return "the data is already there";
    case "sole_supporter":
      return "the only backend that can run it";
    case "user_pinned":
      return "pinned by the user (strict)";
    case "user_preferred":
      return "preferred by the user";
    case "fallback_missing_kernel":
      return "fallback: no preferred backend has a kernel for it";
    case "self_test_failed":
      return "refused: the kernel's self-test differed from the CPU";
    case "below_open_threshold":
      return "not considered: under 4 MiB the CPU serves it without opening plugins";
    case "page_adapter":
      return "coloured on this page's WebGPU adapter (heatmap: Colour on auto / page)";
    case "derived_from_bitpattern_histogram":
      return "derived from the bit-pattern counts";
    case "split_share":
      return "a share of a split op";
    case "counted_by_pyramid_pass":
      return "counted by the pyramid's pass while indexing (each element counted once)";
    default:
      return reason;
  }
}

export function deviceText(p: Placement): string {
  let s = p.device || "?";
  if (p.device_kind) s += ` (${p.device_kind.replace(/_/g, " ")})`;
  if (p.software_adapter) s += " · software adapter: runs on the CPU";
  return s;
}

export function rejectedList(p: Placement): Node | string {
  if (!p.rejected.length) return "—";
  const ul = el("ul", { class: "rejected" });
  for (const r of p.rejected)
    ul.append(
      el(
        "li",
        { "data-backend": r.backend },
        el("b", {}, r.backend + (r.device ? "/" + r.device : "")),
        `: ${r.reason}` + (r.detail ? ` (${r.detail})` : ""),
      ),
    );
  return ul;
}

/**
 * A table of a placement report, one row per op: backend, device, reason, precision, estimate, bytes
 * moved and the rejected candidates. Rows carry data-op, data-backend, data-reason and data-fallback.
 */
export function placementTable(report: Placement[], id: string): HTMLTableElement {
  const t = el("table", { class: "placement", id });
  t.append(
    el(
      "thead",
      {},
      el("tr", {}, ...["op", "backend", "device", "why", "precision", "estimate", "moved", "rejected"].map((h) => el("th", {}, h))),
    ),
  );
  const body = el("tbody");
  for (const p of report) {
    const fallback = isFallback(p);
    const why = el("span", { title: p.reason }, reasonText(p.reason));
    const precision = p.precision + (p.approx_step ? ` · approximation ${p.approx_step}` : "") + (p.consent ? ` (consent: ${p.consent})` : "");
    const tr = el(
      "tr",
      { "data-op": p.op, "data-backend": p.backend, "data-reason": p.reason, "data-fallback": String(fallback) },
      el("td", {}, p.op),
      el("td", { class: "backend" }, el("b", {}, p.backend)),
      el("td", {}, deviceText(p)),
      el("td", {}, why),
      el("td", {}, precision),
      el("td", { class: "num" }, `${fmt(p.estimated_seconds)} s${p.throughput_calibrated ? "" : " (uncalibrated)"}`),
      el("td", { class: "num" }, fmtBytes(p.bytes_transferred)),
      el("td", {}, rejectedList(p)),
    );
    if (fallback) tr.classList.add("fallback");
    body.append(tr);
    if (p.split?.length) body.append(splitRow(p));
  }
  t.append(body);
  return t;
}

/** The line under a split op's row: why, then each share's planned and measured part (and a failure's hand-over). */
function splitRow(p: Placement): HTMLTableRowElement {
  const bytes = (p.split ?? []).reduce((a, s) => a + s.bytes, 0);
  const shares = (p.split ?? []).map((s) => {
    const measured = bytes ? ` → ${((100 * s.bytes) / bytes).toFixed(0)}% (${fmtBytes(s.bytes)} in ${fmt(s.seconds)} s)` : "";
    const failed = s.failed ? `; failed, handed to ${s.handed_to}: ${s.failed}` : "";
    return el(
      "li",
      { "data-backend": s.backend, "data-failed": String(!!s.failed) },
      el("b", {}, s.backend + (s.device ? "/" + s.device : "")),
      `: planned ${(100 * Number(s.fraction)).toFixed(0)}%${measured}${failed}`,
    );
  });
  return el(
    "tr",
    { class: "split", "data-op": p.op },
    el("td", {}, ""),
    el("td", { colspan: "7" }, `split: ${p.split_why ?? ""}`, el("ul", { class: "split-shares" }, ...shares)),
  );
}

/** The latest placement seen per op in this page session, with the API path that reported it. */
export interface SeenPlacement {
  placement: Placement;
  path: string;
  at: Date;
}

const seen = new Map<string, SeenPlacement>();
onPlacement((ev) => {
  for (const p of ev.placement) seen.set(p.op, { placement: p, path: ev.path, at: new Date() });
});

/** The latest report seen for each op (empty until a render ran in this session). */
export function lastSeenPlacements(): Map<string, SeenPlacement> {
  return new Map(seen);
}
