// The tensor's 256-bin histogram over its finite min..max, drawn on a canvas (log or linear counts).
import { num, type Num } from "./api";
import { el } from "./dom";
import { fmt, fmtInt } from "./format";

export function histogramView(h: { edges: Num[]; counts: number[]; below: number; above: number }): HTMLElement {
  const canvas = el("canvas", { class: "histogram", id: "histogram", width: "640", height: "180" });
  const log = el("input", { type: "checkbox", id: "hist-log" });
  log.checked = true;
  const readout = el("span", { class: "hist-readout" });
  const edges = h.edges.map(num);
  const lo = edges[0];
  const hi = edges[edges.length - 1];

  const draw = (): void => {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 640;
    const hgt = canvas.clientHeight || 180;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(hgt * dpr);
    const ctx = canvas.getContext("2d");
    if (!ctx) return;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, hgt);
    const f = log.checked ? (c: number) => Math.log10(1 + c) : (c: number) => c;
    const top = Math.max(1e-9, ...h.counts.map(f));
    const bw = w / h.counts.length;
    ctx.fillStyle = "#3b6ea8";
    h.counts.forEach((c, i) => {
      const bh = (f(c) / top) * (hgt - 4);
      if (c > 0) ctx.fillRect(i * bw, hgt - Math.max(1, bh), Math.max(1, bw - 0.2), Math.max(1, bh));
    });
    if (lo < 0 && hi > 0) {
      const x0 = ((0 - lo) / (hi - lo)) * w;
      ctx.fillStyle = "rgba(0,0,0,0.35)";
      ctx.fillRect(x0, 0, 1, hgt);
    }
  };
  log.addEventListener("change", draw);
  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect();
    const i = Math.min(h.counts.length - 1, Math.max(0, Math.floor(((ev.clientX - r.left) / r.width) * h.counts.length)));
    readout.textContent = `[${fmt(edges[i])}, ${fmt(edges[i + 1])}): ${fmtInt(h.counts[i])}`;
  });
  canvas.addEventListener("mouseleave", () => (readout.textContent = ""));
  requestAnimationFrame(draw);

  return el(
    "div",
    { class: "histogram-view" },
    canvas,
    el(
      "div",
      { class: "hist-axis" },
      el("span", {}, fmt(lo)),
      readout,
      el("span", {}, fmt(hi)),
    ),
    el(
      "div",
      { class: "hist-notes" },
      el("label", {}, log, " log counts"),
      ` · ${h.counts.length} bins over the finite range`,
      h.below || h.above ? ` · below ${fmtInt(h.below)}, above ${fmtInt(h.above)}` : "",
    ),
  );
}
