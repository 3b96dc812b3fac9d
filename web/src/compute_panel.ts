// The Compute panel (#/compute, GET /api/compute): every backend, available or not (with the reason and
// detail), its devices and its kernels (the op, what each takes, precision, required features,
// approximation); the saved and the effective prefer / never constraints and their editor
// (PUT /api/compute); the op × backend matrix with the planner's choice per op under the current
// constraints (the server's placement_preview) and where it last ran in this session; the backends this
// build lacks and the plugins that failed to load; the session's approximation consent (consent.ts).
// Contract: the "planner's choice" column shows only what the server's planner decided for its
// representative request (backend, reason, precision, rejected candidates, or its error); nothing here
// re-derives a placement. A real request (other dtype, size, resident data) may be placed differently: the
// "last run" column and the tensor page show those reports.
import { api, type ComputeBackend, type ComputeDoc, type ComputeKernel, type PlacementPreview } from "./api";
import { consentSection } from "./consent";
import { constraintsEditor } from "./constraints_editor";
import { el } from "./dom";
import { fmt, fmtBytes, fmtInt } from "./format";
import { deviceText, isFallback, lastSeenPlacements, reasonText, rejectedList } from "./placement";
import { diffSection } from "./diff_compute";
import { adapterReport, gpuColorizer } from "./webgpu/colorize";

function listText(names: string[], empty: string): string {
  return names.length ? names.join(", ") : empty;
}

function constraintsTable(doc: ComputeDoc): HTMLTableElement {
  const t = el("table", { class: "facts compute-constraints", id: "compute-constraints" });
  const row = (label: string, id: string, value: string): HTMLTableRowElement =>
    el("tr", {}, el("th", {}, label), el("td", { id }, value));
  t.append(
    el("tr", {}, el("th", {}, ""), el("th", {}, "saved (settings file)"), el("th", {}, "effective (applied now)")),
    el(
      "tr",
      {},
      el("th", {}, "prefer"),
      el("td", { id: "saved-prefer" }, listText(doc.constraints.prefer, "—")),
      el("td", { id: "effective-prefer" }, listText(doc.effective.prefer, "—")),
    ),
    el(
      "tr",
      {},
      el("th", {}, "never"),
      el("td", { id: "saved-never" }, listText(doc.constraints.never, "—")),
      el("td", { id: "effective-never" }, listText(doc.effective.never, "—")),
    ),
  );
  t.append(row("mode", "compute-mode", doc.mode === "auto" ? "auto: the planner picks the cheapest backend per op" : doc.mode));
  t.append(row("settings file", "settings-file", doc.settings_file));
  return t;
}

/** A backend whose hardware or driver is simply not on this machine (no device, no driver): said plainly, not drawn
 *  as an error; the other reasons (a driver too old, a missing library, a policy) are something to act on. */
function absent(b: ComputeBackend): boolean {
  return !b.available && (b.reason === "no_device" || b.reason === "no_driver");
}

function statusBadge(b: ComputeBackend): HTMLElement {
  if (b.available) return el("span", { class: "badge ok" }, "available");
  if (absent(b)) return el("span", { class: "badge absent" }, `not on this machine: ${b.reason}`);
  return el("span", { class: "badge off" }, `unavailable: ${b.reason ?? "unknown reason"}`);
}

/** The panel's first view: one line per backend (status, devices, kernels) before the details. */
function backendSummary(doc: ComputeDoc): HTMLElement {
  const t = el("table", { class: "facts", id: "backend-summary" });
  t.append(el("tr", {}, ...["backend", "status", "devices", "kernels"].map((h) => el("th", {}, h))));
  for (const b of doc.backends)
    t.append(el("tr", { "data-backend": b.name, "data-status": b.available ? "available" : absent(b) ? "absent" : "unavailable" },
      el("td", {}, b.name), el("td", {}, statusBadge(b)), el("td", { class: "num" }, String(b.devices.length)), el("td", { class: "num" }, String(b.kernels.length))));
  return t;
}

function backendCard(b: ComputeBackend, doc: ComputeDoc): HTMLElement {
  const preferIdx = doc.effective.prefer.indexOf(b.name);
  const never = doc.effective.never.includes(b.name);
  const badges = el("span", { class: "badges" }, statusBadge(b));
  if (preferIdx >= 0) badges.append(el("span", { class: "badge prefer" }, `preferred #${preferIdx + 1}`));
  if (never) badges.append(el("span", { class: "badge never" }, "never used"));
  const card = el(
    "section",
    { class: "backend", "data-backend": b.name, "data-available": String(b.available) },
    el("h4", {}, el("span", { class: "backend-name" }, b.name), badges),
    el("p", { class: "backend-description" }, b.description),
  );
  if (!b.available)
    card.append(
      el(
        "p",
        { class: "backend-reason", "data-reason": b.reason ?? "" },
        el("b", {}, absent(b) ? "Not on this machine: " : "Why unavailable: "),
        `${b.reason ?? "unknown"}` + (b.detail ? ` — ${b.detail}` : ""),
      ),
    );
  else if (b.detail) card.append(el("p", { class: "backend-detail" }, b.detail));

  // Devices, kernels and self-tests, folded: the panel opens on the summary above and each card's status line.
  const details = el("details", { class: "backend-details" },
    el("summary", {}, `${b.devices.length} device${b.devices.length === 1 ? "" : "s"}, ${b.kernels.length} kernel${b.kernels.length === 1 ? "" : "s"}`));
  if (b.devices.length) {
    const t = el("table", { class: "devices" });
    t.append(el("tr", {}, ...["#", "device", "kind", "memory", "software adapter"].map((h) => el("th", {}, h))));
    for (const d of b.devices)
      t.append(
        el(
          "tr",
          { "data-device": d.id },
          el("td", {}, String(d.index)),
          el("td", { title: d.id }, d.name),
          el("td", {}, d.kind.replace(/_/g, " ")),
          el("td", { class: "num" }, d.memory_bytes ? fmtBytes(d.memory_bytes) : "—"),
          el("td", {}, d.software_adapter ? "yes: a GPU API run on the CPU" : "no"),
        ),
      );
    details.append(t);
  } else {
    details.append(el("p", { class: "hint" }, "No device."));
  }
  details.append(b.kernels.length ? kernelList(b.kernels) : el("p", { class: "hint" }, "Implements no op."));
  const levels = Object.values(b.parity_levels ?? {});
  const compiled = levels.filter((l) => l === "compiled").length;
  if (compiled)
    details.append(
      el("p", { class: "backend-parity", "data-compiled": String(compiled) },
        `Parity: ${compiled} capabilities compiled (tested on the host under emulation, never run on this hardware in CI); ` +
          "each kernel is self-tested against the CPU before its first call."),
    );
  const tests = (doc.self_tests ?? []).filter((v) => v.backend === b.name);
  if (tests.length) {
    const failed = tests.filter((v) => v.status === "failed");
    const p = el("div", { class: "backend-self-tests", "data-failed": String(failed.length) },
      `Self-tests so far: ${tests.filter((v) => v.status === "passed").length} passed, ${failed.length} failed, ` +
        `${tests.filter((v) => v.status === "not_tested").length} not tested.`);
    if (failed.length) {
      const ul = el("ul", {});
      for (const v of failed)
        ul.append(el("li", { "data-op": v.op }, el("b", {}, `${v.op} on ${v.input}`), ` refused (self_test_failed): ${v.detail}`));
      p.append(ul);
      details.open = true;  // a refused kernel is shown, not folded away
    }
    details.append(p);
  }
  card.append(details);
  return card;
}

/** A byte count without a needless ".0" (64 MiB, 1.5 GiB). */
function sizeText(n: number): string {
  return fmtBytes(n).replace(/\.0 /, " ");
}

/** What each kernel takes and needs, one item per kernel (an op may have several). */
function kernelList(kernels: ComputeKernel[]): HTMLUListElement {
  const ul = el("ul", { class: "kernels" });
  for (const k of kernels) {
    const head = el("div", {}, el("code", {}, k.op), ` ${k.precision}`);
    if (k.approx_step) head.append(" · ", el("span", { class: "approx", title: k.approx_description ?? "" }, `approximation ${k.approx_step}`));
    if (k.required_features.length) head.append(el("span", { class: "needs" }, ` · needs ${k.required_features.join(", ")}`));
    if (k.max_elements) head.append(el("span", { class: "needs" }, ` · at most ${fmtInt(k.max_elements)} elements`));
    ul.append(
      el(
        "li",
        { "data-op": k.op, "data-inputs": k.dtypes.join(" ") },
        head,
        el("div", { class: "inputs" }, "takes ", el("span", {}, k.dtypes.length ? k.dtypes.join(" ") : "—")),
      ),
    );
  }
  return ul;
}

/** The request the server placed: "f32, 64 MiB on the host". */
function requestText(r: PlacementPreview["request"]): string {
  const what = r.format ? `format ${r.format}` : (r.dtype ?? "?");
  return `${what}, ${sizeText(r.bytes)} ${r.on_host ? "on the host" : "on a device"}`;
}

/** The planner's choice for one op (the server's preview), or its error when nothing may serve it. */
function previewCell(pv: PlacementPreview | undefined): HTMLTableCellElement {
  if (!pv) return el("td", { class: "preview hint", "data-backend": "" }, "no preview from the server");
  const request = el("div", { class: "preview-request hint" }, `for ${requestText(pv.request)}`);
  const p = pv.placement;
  if (!p)
    return el(
      "td",
      { class: "preview error", "data-backend": "", "data-reason": "" },
      el("span", { class: "preview-error" }, pv.needs_consent ? "only an approximation can serve it: see Approximations above" : (pv.error ?? "no backend may run it")),
      request,
    );
  const cell = el("td", {
    class: isFallback(p) ? "preview fallback" : "preview",
    "data-backend": p.backend,
    "data-reason": p.reason,
  });
  const precision = p.precision + (p.approx_step ? ` · approximation ${p.approx_step}` : "");
  cell.append(
    el("b", {}, p.backend),
    ` on ${deviceText(p)}: `,
    el("span", { class: "preview-reason", title: p.reason }, reasonText(p.reason)),
    el("div", { class: "hint" }, `${precision} · est. ${fmt(p.estimated_seconds)} s${p.throughput_calibrated ? "" : " (uncalibrated)"} · moves ${sizeText(p.bytes_transferred)}`),
    request,
  );
  if (p.rejected.length)
    cell.append(el("details", { class: "preview-rejected" }, el("summary", {}, `${p.rejected.length} rejected`), rejectedList(p)));
  return cell;
}

function opMatrix(doc: ComputeDoc): HTMLTableElement {
  const ops: string[] = [];
  for (const b of doc.backends) for (const o of b.ops) if (!ops.includes(o.op)) ops.push(o.op);
  const seen = lastSeenPlacements();
  const t = el("table", { class: "op-matrix", id: "op-matrix" });
  const head = el("tr", {}, el("th", {}, "op"));
  for (const b of doc.backends) {
    const cls = !b.available ? "unavailable" : doc.effective.never.includes(b.name) ? "never" : "";
    head.append(el("th", cls ? { class: cls, title: !b.available ? `unavailable: ${b.reason}` : "never used" } : {}, b.name));
  }
  head.append(el("th", {}, "planner's choice (server preview)"), el("th", {}, "last run (this session)"));
  t.append(el("thead", {}, head));
  const body = el("tbody");
  for (const op of ops) {
    const tr = el("tr", { "data-op": op }, el("td", {}, el("code", {}, op)));
    for (const b of doc.backends) {
      const k = b.ops.find((o) => o.op === op);
      const excluded = !b.available || doc.effective.never.includes(b.name);
      tr.append(el("td", { class: k ? (excluded ? "has excluded" : "has") : "none", "data-backend": b.name }, k ? k.precision : "—"));
    }
    tr.append(previewCell(doc.placement_preview.find((pv) => pv.op === op)));
    const last = seen.get(op);
    if (last) {
      const p = last.placement;
      const cell = el("td", { class: isFallback(p) ? "last fallback" : "last", "data-backend": p.backend, title: `${last.path} at ${last.at.toLocaleTimeString()}` });
      cell.append(el("b", {}, p.backend), ` on ${p.device}: ${reasonText(p.reason)}`);
      tr.append(cell);
    } else {
      tr.append(el("td", { class: "last hint" }, "not run yet"));
    }
    body.append(tr);
  }
  t.append(body);
  return t;
}

function missingSection(doc: ComputeDoc): HTMLElement[] {
  const out: HTMLElement[] = [];
  if (doc.not_installed.length) {
    const ul = el("ul", { id: "not-installed" });
    for (const n of doc.not_installed)
      ul.append(el("li", { "data-backend": n.name }, el("b", {}, n.name), ` (${n.kind}): ${n.description}`));
    out.push(el("h3", {}, "Not installed in this build"), ul);
  }
  if (doc.plugin_load_failures.length) {
    const ul = el("ul", { id: "plugin-failures" });
    for (const f of doc.plugin_load_failures)
      ul.append(el("li", {}, el("code", {}, f.path), `: ${f.reason}` + (f.detail ? ` — ${f.detail}` : "")));
    out.push(el("h3", {}, "Plugins that failed to load"), ul);
  }
  return out;
}

/** The acquisitions the server keeps resident: where each copy lives, its size and when it was built; evictions. */
function residentSection(doc: ComputeDoc): HTMLElement[] {
  const r = doc.resident;
  if (!r) return [];
  const summary = el(
    "p",
    { class: "status", id: "resident-summary" },
    r.budget === 0
      ? "Off (serve --resident-memory 0): every 4D-STEM product decodes its acquisition."
      : `${sizeText(r.resident_bytes)} of ${sizeText(r.budget)} held; least recently used copies are evicted beyond it.`,
  );
  const ul = el("ul", { id: "resident-copies" });
  for (const c of r.copies)
    ul.append(
      el(
        "li",
        { "data-acquisition": c.acquisition },
        el("code", {}, c.acquisition),
        ` (${c.scan_shape[0]} × ${c.scan_shape[1]}): in ${c.where} memory, ${sizeText(c.bytes)} ` +
          `(${Math.round(c.bytes_per_frame)} bytes per frame against ${c.dense_bytes_per_frame} dense), ${c.order} order, ` +
          `built ${c.built_at} in ${c.build_seconds.toFixed(2)} s, used ${c.uses}×` +
          (c.device_copies ?? [])
            .map((d) => `; also on ${d.location} (${d.device}): ${sizeText(d.bytes)}, uploaded ${d.built_at} in ${d.build_seconds.toFixed(2)} s`)
            .join(""),
      ),
    );
  if (!r.copies.length) ul.append(el("li", {}, "none yet (a copy is built by an acquisition's first product)"));
  const out: HTMLElement[] = [el("h3", {}, "Resident acquisitions"), summary, ul];
  if (r.evictions.length) {
    const last = r.evictions[r.evictions.length - 1];
    out.push(
      el("p", { class: "hint", id: "resident-evictions" },
        `${r.evictions.length} eviction(s); the last: ${last.acquisition} (${sizeText(last.bytes)}) at ${last.evicted_at}, ${last.reason}`),
    );
  }
  return out;
}

/** Draws the panel for one document; re-drawn with the server's answer after a save. */
function draw(root: HTMLElement, doc: ComputeDoc, message: string): void {
  const summary = el(
    "p",
    { class: "status", id: "compute-summary" },
    `${doc.backends.filter((b) => b.available).length} of ${doc.backends.length} backends available · mode ${doc.mode}`,
  );
  // The browser's own compute: the WebGPU adapter this page colours tile statistics on (webgpu/colorize.ts).
  const pageGpu = el("p", { class: "status", id: "page-webgpu" }, "This page: asking for a WebGPU adapter…");
  void gpuColorizer().then(() => {
    const r = adapterReport();
    pageGpu.textContent = "This page (display colours and histograms of tile statistics): " + (r?.label ?? "webgpu: unavailable") +
      (r?.available ? "" : "; the server's path is used");
    pageGpu.dataset.adapter = r?.label ?? "";
    pageGpu.dataset.software = String(r?.software ?? false);
  });
  const saved = el("p", { class: "save-status", id: "compute-saved-message" }, message);
  saved.hidden = !message;
  const backends = el("div", { class: "backends", id: "backends" }, ...doc.backends.map((b) => backendCard(b, doc)));
  root.replaceChildren(
    el("a", { href: "#/", class: "back" }, "← all tensors"),
    el("h2", {}, "Compute"),
    summary,
    backendSummary(doc),
    pageGpu,
    el("h3", {}, "Constraints"),
    constraintsTable(doc),
    constraintsEditor(doc, (next, msg) => draw(root, next, msg)),
    saved,
    el("h3", {}, "Approximations"),
    consentSection(doc, (next, msg) => draw(root, next, msg)),
    el("h3", {}, "Backends"),
    backends,
    el("h3", {}, "Placement per op"),
    el(
      "p",
      { class: "hint" },
      "Which backend implements each op, and with what precision; where the server's planner places it now, under the " +
        "effective constraints, for a representative request (shown under it), with the candidates it rejected and why; " +
        "and where it last ran in this page session. A real request (another dtype, size, or data already on a device) " +
        "may be placed differently: renders report where they ran (“last run” and the tensor page).",
    ),
    opMatrix(doc),
    ...diffSection(),
    ...residentSection(doc),
    ...missingSection(doc),
  );
}

export async function renderComputePanel(root: HTMLElement): Promise<void> {
  root.replaceChildren(el("p", { class: "status" }, "Loading the compute backends…"));
  const doc = await api.compute();
  draw(root, doc, "");
}
