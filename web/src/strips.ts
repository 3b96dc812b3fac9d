// Comparison strips ("Across layers") on a tensor page: the same tensor role in every layer of the
// same checkpoint (layer_groups.ts decides which names match), one row per layer in layer order.
//
// Contract of the section `layerStrips()` returns (null for a name without a numeric segment):
// - `section#strips`, data-state "loading" → "ready" | "single" (only this layer has the role) | "error";
//   when ready, data-stat, data-limits-mode, data-limits ("lo,hi"), data-colormap, data-concurrency (the
//   most thumbnail fetches allowed at once) and data-max-inflight (the most seen at once so far).
// - one `tr.strip-row` per layer with data-layer, data-name, data-state ("unavailable" for a tensor
//   without statistics, else "waiting" | "loading" | "loaded" | "error") and, when it has statistics,
//   data-mean, data-std, data-absmax: the numbers of its GET /api/tensors row (num() of them, as drawn in
//   its bars). The current layer has class "current" and aria-current="page". Its layer number links to
//   `#/tensor/{ckpt}/{name}`.
// - thumbnails: the server's overview render (GET /api/render/{ckpt}/{name}.png, no level) with the ONE
//   stat, colormap and limits of the section (strip_limits.ts: from the rows' statistics, no render is
//   asked for its range), drawn as `img.strip-thumb` with data-limits equal to the section's. A render
//   that fails shows the server's message in `.strip-error` instead. A new style keeps each old thumbnail,
//   with class strip-stale, until its new one replaces it. Thumbnails load lazily: only rows
//   scrolled near the view are fetched (IntersectionObserver), at most CONCURRENCY at once.
// - bars: per-layer mean (diverging about 0), std and abs_max, each scaled to the largest |value| of the
//   rows, with the value written beside it.
// window.tmLayerGroups exposes the pure grouping and limits functions for the e2e test (tests/e2e/strips.test.mjs).
import { getBlob, getJson, num, tensorPath, type TensorList, type TensorRow } from "./api";
import { describeError, el } from "./dom";
import { fmt } from "./format";
import { layerSiblings, siblingQuery, splitLayer } from "./layer_groups";
import { stripScale, type StripLimitsMode, type StripScale, type StripStat } from "./strip_limits";

const CONCURRENCY = 2; // thumbnail renders in flight at once (the server renders one at a time anyway)
const STATS: StripStat[] = ["mean", "std", "abs_max"];
const MODES: StripLimitsMode[] = ["robust", "full"];

(window as unknown as { tmLayerGroups: unknown }).tmLayerGroups = { splitLayer, layerSiblings, siblingQuery, stripScale };

/** Runs queued tasks, at most `limit` at once, in queue order; counts the most it saw running. */
class TaskQueue {
  private running = 0;
  maxRunning = 0;
  private readonly waiting: (() => Promise<void>)[] = [];
  constructor(
    private readonly limit: number,
    private readonly onChange: () => void,
  ) {}
  /** Queues a task; it must not reject. */
  push(task: () => Promise<void>): void {
    this.waiting.push(task);
    this.pump();
  }
  clear(): void {
    this.waiting.length = 0;
  }
  private pump(): void {
    while (this.running < this.limit && this.waiting.length) {
      const task = this.waiting.shift() as () => Promise<void>;
      this.running++;
      this.maxRunning = Math.max(this.maxRunning, this.running);
      this.onChange();
      void task().finally(() => {
        this.running--;
        this.onChange();
        this.pump();
      });
    }
  }
}

interface Strip {
  layer: number;
  row: TensorRow;
  tr: HTMLTableRowElement;
  thumb: HTMLTableCellElement;
  queued: number; // the style generation its thumbnail was queued for (-1: none)
  url: string | null; // the object URL of its thumbnail
}

function tensorHref(ckpt: string, name: string): string {
  return `#/tensor/${encodeURIComponent(ckpt)}/${encodeURIComponent(name)}`;
}

/** A bar of `value` against `scale` (> 0): from the left, or about the middle when `diverging` (also diff mode's, diff_page.ts). */
export function bar(value: number, scale: number, diverging: boolean, cls: string): HTMLTableCellElement {
  const f = Number.isFinite(value) && scale > 0 ? Math.min(1, Math.abs(value) / scale) : 0;
  const fill = el("span", { class: "strip-bar-fill" });
  if (diverging) {
    fill.style.width = `${f * 50}%`;
    fill.style.left = value < 0 ? `${50 - f * 50}%` : "50%";
    fill.classList.add(value < 0 ? "neg" : "pos");
  } else fill.style.width = `${f * 100}%`;
  const track = el("span", { class: "strip-bar" + (diverging ? " diverging" : "") }, fill);
  return el("td", { class: `strip-stat ${cls}` }, track, el("span", { class: "strip-value" }, fmt(value)));
}

function maxAbs(values: number[]): number {
  return values.reduce((m, v) => (Number.isFinite(v) ? Math.max(m, Math.abs(v)) : m), 0);
}

/** The "Across layers" section for tensor `name` of checkpoint `ckpt`, filled asynchronously; null when the name has no layer. */
export function layerStrips(ckpt: string, name: string): HTMLElement | null {
  if (!splitLayer(name)) return null;
  const section = el("section", { id: "strips", class: "strips", "data-state": "loading" }, el("h3", {}, "Across layers"));
  const status = el("p", { class: "status" }, "Finding this tensor in the other layers…");
  section.append(status);
  void fill(section, status, ckpt, name).catch((e) => {
    section.dataset.state = "error";
    status.className = "notice";
    status.textContent = "Cannot list the other layers: " + describeError(e);
  });
  return section;
}

async function fill(section: HTMLElement, status: HTMLElement, ckpt: string, name: string): Promise<void> {
  const list = await getJson<TensorList>("/api/tensors", { q: siblingQuery(name), limit: 100000 });
  const rows = new Map(list.tensors.filter((t) => t.checkpoint === ckpt).map((t) => [t.name, t]));
  const members = layerSiblings(name, rows.keys());
  if (members.length < 2) {
    section.dataset.state = "single";
    status.className = "hint";
    status.textContent = "No other layer of this checkpoint has this tensor.";
    return;
  }

  const stat = el("select", { id: "strips-stat", title: "the cell statistic the thumbnails draw" });
  for (const s of STATS) stat.append(el("option", { value: s }, s));
  const mode = el("select", { id: "strips-limits", title: "how the shared colour limits are chosen (see docs/viewer.md)" });
  for (const m of MODES) mode.append(el("option", { value: m }, m === "robust" ? "robust (±3σ)" : "full range"));
  const scaleText = el("span", { class: "strip-scale hint" });
  const controls = el("div", { class: "strip-controls" }, el("label", {}, "thumbnails: ", stat), el("label", {}, "limits: ", mode), scaleText);

  const stats = members.map((m) => (rows.get(m.name) as TensorRow).stats);
  const scales = {
    mean: maxAbs(stats.map((s) => num(s?.mean))),
    std: maxAbs(stats.map((s) => num(s?.std))),
    abs_max: maxAbs(stats.map((s) => num(s?.abs_max))),
  };
  const tbody = el("tbody");
  const table = el(
    "table",
    { class: "strips-table", id: "strips-table" },
    el("thead", {}, el("tr", {}, el("th", {}, "layer"), el("th", {}, "overview"), el("th", {}, "mean"), el("th", {}, "std"), el("th", {}, "abs max"))),
    tbody,
  );
  const strips: Strip[] = members.map((m) => {
    const row = rows.get(m.name) as TensorRow;
    const current = m.name === name;
    const tr = el("tr", { class: "strip-row" + (current ? " current" : ""), "data-layer": String(m.layer), "data-name": m.name });
    if (current) tr.setAttribute("aria-current", "page");
    const link = el("a", { href: tensorHref(ckpt, m.name), class: "strip-link", title: m.name }, String(m.layer));
    const thumb = el("td", { class: "strip-thumb-cell" });
    tr.append(el("td", { class: "strip-layer" }, link), thumb);
    const s = row.stats;
    if (!s) {
      tr.dataset.state = "unavailable";
      thumb.append(el("span", { class: "strip-unavailable" }, "unavailable" + (row.unavailable ? `: ${row.unavailable}` : "")));
      tr.append(el("td", { colspan: "3", class: "strip-unavailable" }, "no statistics"));
    } else {
      const [mean, std, absMax] = [num(s.mean), num(s.std), num(s.abs_max)];
      tr.dataset.mean = String(mean);
      tr.dataset.std = String(std);
      tr.dataset.absmax = String(absMax);
      tr.append(bar(mean, scales.mean, true, "strip-mean"), bar(std, scales.std, false, "strip-std"), bar(absMax, scales.abs_max, false, "strip-absmax"));
    }
    tbody.append(tr);
    return { layer: m.layer, row, tr, thumb, queued: -1, url: null };
  });
  status.remove();
  section.append(
    el("p", { class: "hint" }, `${members.length} layers share this tensor's role; thumbnails use one colour scale, so they compare directly.`),
    controls,
    table,
  );
  section.dataset.concurrency = String(CONCURRENCY);

  // Thumbnails: one style (stat, limits) at a time; a change starts a new generation and redraws.
  let generation = 0;
  let scale: StripScale | null = null;
  let abort = new AbortController();
  const queue = new TaskQueue(CONCURRENCY, () => (section.dataset.maxInflight = String(queue.maxRunning)));

  const load = async (strip: Strip, gen: number): Promise<void> => {
    if (gen !== generation || !section.isConnected || !scale) return;
    const signal = abort.signal;
    strip.tr.dataset.state = "loading";
    const limits = `${scale.limits[0]},${scale.limits[1]}`;
    try {
      const blob = await getBlob(tensorPath("render", ckpt, strip.row.name, ".png"), { stat: stat.value, colormap: scale.colormap, limits }, signal);
      const url = URL.createObjectURL(blob);
      const img = el("img", { class: "strip-thumb", alt: `${strip.row.name} (${stat.value})`, "data-limits": limits });
      img.src = url;
      await img.decode();
      if (gen !== generation) return URL.revokeObjectURL(url);
      if (strip.url) URL.revokeObjectURL(strip.url);
      strip.url = url;
      strip.thumb.replaceChildren(img);
      strip.tr.dataset.state = "loaded";
    } catch (e) {
      if (gen !== generation || (e instanceof DOMException && e.name === "AbortError")) return;
      if (strip.url) URL.revokeObjectURL(strip.url);
      strip.url = null;
      strip.thumb.replaceChildren(el("span", { class: "strip-error" }, describeError(e)));
      strip.tr.dataset.state = "error";
    }
  };
  const want = (strip: Strip): void => {
    if (strip.queued === generation || strip.tr.dataset.state === "unavailable") return;
    strip.queued = generation;
    const gen = generation;
    queue.push(() => load(strip, gen));
  };
  const byRow = new Map(strips.map((s) => [s.tr as Element, s]));
  // The rows the observer last reported near the view. A restyle queues these itself: it does not wait for
  // the observer to report them again (a re-observed row that does not move is not always reported anew).
  const near = new Set<Strip>();
  const observer: IntersectionObserver | null =
    typeof IntersectionObserver === "function"
      ? new IntersectionObserver(
          (entries, self) => {
            if (!section.isConnected) {
              // The page was left (removed rows report once more): stop watching, free the thumbnails.
              self.disconnect();
              abort.abort();
              queue.clear();
              for (const s of strips) if (s.url) URL.revokeObjectURL(s.url);
              return;
            }
            for (const e of entries) {
              const strip = byRow.get(e.target) as Strip;
              if (e.isIntersecting) {
                near.add(strip);
                want(strip);
              } else near.delete(strip);
            }
          },
          { rootMargin: "200px" },
        )
      : null;

  const restyle = (): void => {
    generation++;
    abort.abort();
    abort = new AbortController();
    queue.clear();
    scale = stripScale(stats, stat.value as StripStat, mode.value as StripLimitsMode);
    section.dataset.stat = stat.value;
    section.dataset.limitsMode = mode.value;
    section.dataset.limits = scale ? `${scale.limits[0]},${scale.limits[1]}` : "";
    section.dataset.colormap = scale?.colormap ?? "";
    scaleText.textContent = scale ? `shared limits ${fmt(scale.limits[0])} … ${fmt(scale.limits[1])}, ${scale.colormap}` : "no finite statistics to scale by";
    for (const s of strips) {
      if (s.tr.dataset.state === "unavailable") continue;
      s.tr.dataset.state = "waiting";
      // The old thumbnail stays, dimmed, until the new one replaces it (the rows keep their height).
      const old = s.thumb.querySelector("img.strip-thumb");
      if (old) old.classList.add("strip-stale");
      else s.thumb.replaceChildren(el("span", { class: "strip-wait" }, "…"));
      if (!observer || near.has(s)) want(s);
    }
  };
  for (const s of strips) observer?.observe(s.tr);
  stat.addEventListener("change", restyle);
  mode.addEventListener("change", restyle);
  restyle();
  section.dataset.state = "ready";
}
