// Which decode path fills the page's block, and what it cost: the choice (#stem-decode-path: the stored chunks
// decoded on the page's adapter, decode.ts, or the block decoded by the server, block.ts; kept in localStorage
// "tm.stem.decode", "chunks" by default) and the line reporting the path that ran (#stem-decode-report: bytes over
// the wire, bytes decoded, the decode rate; its data-* attributes carry the numbers for tests and benches).
import { el } from "../dom";
import type { DecodeReport } from "./webgpu/decode";

export type DecodeChoice = "chunks" | "block";

export function decodeChoice(): DecodeChoice {
  try {
    return localStorage.getItem("tm.stem.decode") === "block" ? "block" : "chunks";
  } catch {
    return "chunks";
  }
}

/** The choice as a <select>; `onChange` runs after the choice is stored. */
export function decodeSelect(onChange: () => void): HTMLSelectElement {
  const select = el("select", { id: "stem-decode-path", title: "how the page's block is filled (when the page computes)" },
    el("option", { value: "chunks" }, "Decode: compressed chunks on the page"), el("option", { value: "block" }, "Decode: block from the server")) as HTMLSelectElement;
  select.value = decodeChoice();
  select.addEventListener("change", () => {
    try {
      localStorage.setItem("tm.stem.decode", select.value);
    } catch {
      /* no storage: the choice lasts this page */
    }
    onChange();
  });
  return select;
}

const mib = (b: number) => (b / 2 ** 20).toFixed(2);

export class DecodeReportLine {
  readonly element: HTMLElement = el("p", { class: "status", id: "stem-decode-report" }, "decode: not run (the server computes)");
  path: "chunks" | "block" | "resident" | "refused" | "" = "";

  private set(path: "chunks" | "block" | "resident" | "refused", text: string, numbers: Record<string, number>): void {
    this.path = path;
    this.element.textContent = text;
    this.element.dataset.path = path;
    for (const [k, v] of Object.entries(numbers)) this.element.dataset[k] = String(v);
  }

  report(r: DecodeReport, adapter: string): void {
    const rate = r.decodeMs > 0 ? r.decodedBytes / 2 ** 20 / (r.decodeMs / 1000) : 0;
    this.set("chunks", `decode: ${r.chunks} compressed chunks decoded on the page's adapter (WGSL, ${adapter}): ${mib(r.wireBytes)} MiB over the wire ` +
      `for ${mib(r.decodedBytes)} MiB of frames (${(r.decodedBytes / Math.max(1, r.wireBytes)).toFixed(1)}×), decode ${rate.toFixed(1)} MiB/s ` +
      `(${r.decodeMs.toFixed(0)} ms on the adapter, ${r.fetchMs.toFixed(0)} ms waiting for the server, ${r.windows} window${r.windows > 1 ? "s" : ""}, ${r.totalMs.toFixed(0)} ms in all)`,
    { wireBytes: r.wireBytes, decodedBytes: r.decodedBytes, decodeMs: r.decodeMs, fetchMs: r.fetchMs, totalMs: r.totalMs, chunks: r.chunks });
  }

  block(bytes: number, ms: number, why: string): void {
    this.set("block", `decode: the block decoded on the server: ${mib(bytes)} MiB over the wire in ${ms.toFixed(0)} ms` + (why ? ` (chunks not decoded on the page: ${why})` : ""),
      { wireBytes: bytes, decodedBytes: bytes, totalMs: ms });
  }

  /** The acquisition's block was already on the page's adapter (an earlier view): nothing fetched. */
  reused(): void {
    this.set("resident", "decode: none needed, the acquisition's block is already on the page's adapter (nothing fetched)", {});
  }

  refused(why: string): void {
    this.set("refused", `decode refused: ${why}`, {});
  }
}
