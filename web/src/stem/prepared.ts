// The acquisition's prepared products (`tensormorph stem prepare`, docs/stem.md "Prepared products") as the page
// reads them: GET …/prepared says whether the server's product cache answers this acquisition, as its files are now,
// in the page's view (the entry's key and build time), or why not — none, stale (the files changed after prepare),
// another load request or contract, damaged; GET …/prepared/{kind} is a prepared product as stored (the numbers `stem
// KIND --cache` prints, nothing decoded, no pass placed). The page draws those as served and computes only what the
// cache does not hold or what the user changes (a dragged detector); the line #stem-prepared says which.
import { getJson } from "../api";
import { el } from "../dom";

export interface PreparedEntry {
  key: { source: string; contract: number };
  created_at: number;
  created: string;
  prepare_seconds: number;
  master: string;
  signature: string;
  scan_shape: number[];
  frame_shape: number[];
  disk: { row: number; col: number; radius: number };
  detectors: { name: string; inner_px: number; outer_px: number | string; pixels: number }[];
  products: string[];
}

export interface PreparedStatus {
  database: string;
  exists: boolean;
  hit: boolean;
  why?: string;
  entry?: PreparedEntry;
  others: { created: string; why: string }[];
}

/** The cache's numbers for one product, in the products endpoint's JSON (values row-major, report beside them). */
export interface PreparedProduct {
  shape: number[];
  dtype: string;
  values: number[];
  placement: [];
  detector?: { inner_px: number | string; outer_px: number | string; pixels: number; name?: string };
  cache: { hit: true; database: string; created: string; created_at: number; prepare_seconds: number };
}

/** The page's view of the product cache: `entry` when it answers, the status line, and fetching products from it. */
export class PreparedCache {
  readonly element: HTMLElement;
  /** Whether the user lets the cache answer (the checkbox; on when it answers). */
  private use = true;

  private constructor(readonly path: string, readonly view: Record<string, string>, readonly status: PreparedStatus, private readonly onToggle: () => void) {
    const line = el("span", { id: "stem-prepared-text" }, this.text());
    const box = el("input", { type: "checkbox", id: "stem-use-prepared", title: "draw the prepared products from the cache" });
    (box as HTMLInputElement).checked = this.hit;
    (box as HTMLInputElement).disabled = !this.hit;
    box.addEventListener("change", () => {
      this.use = (box as HTMLInputElement).checked;
      this.element.dataset.used = this.use ? "1" : "0";
      this.onToggle();
    });
    this.element = el("p", { class: "status", id: "stem-prepared" }, el("label", {}, box, " prepared products: "), line);
    this.element.dataset.hit = this.hit ? "1" : "0";
    this.element.dataset.used = this.hit ? "1" : "0";
  }

  /** Asks the server (GET …/prepared with the page's view); a server without the endpoint or a failure is no hit, said. */
  static async open(path: string, view: Record<string, string>, onToggle: () => void): Promise<PreparedCache> {
    let status: PreparedStatus;
    try {
      status = await getJson<PreparedStatus>(`${path}/prepared`, view);
    } catch (e) {
      status = { database: "", exists: false, hit: false, why: `the server's product cache could not be read (${e instanceof Error ? e.message : String(e)})`, others: [] };
    }
    return new PreparedCache(path, view, status, onToggle);
  }

  get hit(): boolean {
    return this.status.hit && this.status.entry !== undefined;
  }

  /** Whether the cache answers and the user lets it. */
  get used(): boolean {
    return this.hit && this.use;
  }

  /** The identity the captions name: "the product cache (built 2026-… UTC, source d1a8…)". */
  identity(): string {
    const e = this.status.entry;
    return e ? `the prepared product cache (built ${e.created.replace("T", " ").replace("Z", " UTC")}, source ${e.signature})` : "";
  }

  text(): string {
    const e = this.status.entry;
    if (!this.hit || !e) return `none drawn — ${this.status.why ?? "the cache does not answer"}; the page computes every product`;
    return `drawn from ${this.identity()} in ${this.status.database} (prepare took ${e.prepare_seconds.toFixed(2)} s): the mean and max patterns, ` +
      `the ${e.detectors.map((d) => d.name.toUpperCase()).join(", ")} images and the centre of mass, as stored, not recomputed; ` +
      "a changed detector is computed";
  }

  /** The preset's detector as prepared (radii in pixels about the prepared disk), or null. */
  preset(name: string): { inner: number; outer: number } | null {
    const d = this.status.entry?.detectors.find((x) => x.name === name);
    return d ? { inner: Number(d.inner_px), outer: d.outer_px === "inf" ? Infinity : Number(d.outer_px) } : null;
  }

  /** A prepared product as served (GET …/prepared/{kind}); `query` adds max=1 and the like. */
  product(kind: string, query: Record<string, string> = {}): Promise<PreparedProduct> {
    return getJson<PreparedProduct>(`${this.path}/prepared/${kind}`, { ...query, ...this.view });
  }
}
