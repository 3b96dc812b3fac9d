// What dragging on the acquisition page's virtual image does (#stem-image-drag): nothing but hovering and clicking
// for patterns (the default), drawing a line whose profile is plotted (the image's values sampled every scan step
// along it, distance in nm when the scan step is known), or drawing a scan region whose patterns are averaged
// (the real-space region of interest of hyperspy / pyxem navigators; the caller computes the mean pattern). The
// line or region stays drawn on an overlay canvas above the image.
import { el } from "../dom";
import { ProfilePlot } from "../profile_plot";

export type DragMode = "hover" | "line" | "region";

export interface ImageToolsHost {
  image: HTMLCanvasElement;
  /** The image's [rows, cols] and row-major values, null before the first image. */
  current: () => { shape: number[]; values: number[] } | null;
  /** nm between scan positions, when known. */
  nmPerStep?: number;
  title: () => string;
  /** Scan rows [r0, r1) and columns [c0, c1) of the image were chosen as a region. */
  onRegion: (rows: [number, number], cols: [number, number]) => Promise<void>;
}

/** The scan positions sampled along the segment from a to b (position coordinates: a position's centre is at
 *  index + 0.5): one sample per scan step of length (at least 2), each the position holding that point. */
export function lineSamples(a: [number, number], b: [number, number], rows: number, cols: number): { at: [number, number][]; length: number } {
  const length = Math.hypot(b[0] - a[0], b[1] - a[1]);
  const n = Math.max(2, Math.ceil(length) + 1);
  const at: [number, number][] = [];
  for (let k = 0; k < n; k++) {
    const t = k / (n - 1);
    const r = Math.min(rows - 1, Math.max(0, Math.floor(a[0] + t * (b[0] - a[0]))));
    const c = Math.min(cols - 1, Math.max(0, Math.floor(a[1] + t * (b[1] - a[1]))));
    at.push([r, c]);
  }
  return { at, length };
}

export class ImageTools {
  readonly select: HTMLSelectElement;
  readonly overlay: HTMLCanvasElement;
  readonly plot = new ProfilePlot("stem-line-profile", 360, 150);
  /** The last line or region drawn, in scan-position coordinates, for tests. */
  readonly state: { line: [number, number, number, number] | null; region: [number, number, number, number] | null; samples: number[] } = { line: null, region: null, samples: [] };
  private start: [number, number] | null = null;

  constructor(private readonly host: ImageToolsHost) {
    this.select = el("select", { id: "stem-image-drag", title: "what dragging on the virtual image does" },
      el("option", { value: "hover" }, "hover / click: patterns"), el("option", { value: "line" }, "drag: line profile"),
      el("option", { value: "region" }, "drag: region → mean pattern"));
    this.overlay = el("canvas", { id: "stem-image-overlay", class: "stem-image-overlay" });
    const img = host.image;
    img.addEventListener("pointerdown", (ev) => {
      if (this.mode() === "hover") return;
      this.start = this.position(ev);
      img.setPointerCapture(ev.pointerId);
    });
    img.addEventListener("pointermove", (ev) => {
      if (!this.start || this.mode() === "hover") return;
      this.drawShape(this.start, this.position(ev));
    });
    img.addEventListener("pointerup", (ev) => {
      if (!this.start || this.mode() === "hover") return;
      const end = this.position(ev);
      const start = this.start;
      this.start = null;
      this.drawShape(start, end);
      if (this.mode() === "line") this.profile(start, end);
      else void this.region(start, end);
    });
    this.select.addEventListener("change", () => {
      this.clear();
      if (this.mode() !== "line") this.plot.element.hidden = true;
    });
  }

  mode(): DragMode {
    return this.select.value as DragMode;
  }

  /** The pointer's place in scan-position coordinates (rows, cols; fractional). */
  private position(ev: PointerEvent): [number, number] {
    const cur = this.host.current();
    const [rows, cols] = cur ? cur.shape : [1, 1];
    const r = this.host.image.getBoundingClientRect();
    const clamp = (v: number, n: number) => Math.min(n, Math.max(0, v));
    return [clamp(((ev.clientY - r.top) / r.height) * rows, rows), clamp(((ev.clientX - r.left) / r.width) * cols, cols)];
  }

  private clear(): void {
    const o = this.overlay;
    o.width = this.host.image.width;
    o.height = this.host.image.height;
    o.getContext("2d")?.clearRect(0, 0, o.width, o.height);
  }

  private drawShape(a: [number, number], b: [number, number]): void {
    this.clear();
    const cur = this.host.current();
    const ctx = this.overlay.getContext("2d");
    if (!cur || !ctx) return;
    const sy = this.overlay.height / cur.shape[0], sx = this.overlay.width / cur.shape[1];
    ctx.strokeStyle = "#ff3b30";
    ctx.lineWidth = 2;
    if (this.mode() === "line") {
      ctx.beginPath();
      ctx.moveTo(a[1] * sx, a[0] * sy);
      ctx.lineTo(b[1] * sx, b[0] * sy);
      ctx.stroke();
    } else {
      const [r0, r1, c0, c1] = this.rect(a, b, cur.shape[0], cur.shape[1]);
      ctx.strokeRect(c0 * sx + 1, r0 * sy + 1, (c1 - c0) * sx - 2, (r1 - r0) * sy - 2);
    }
  }

  /** The whole scan positions the drag covers: [r0, r1, c0, c1), at least one position. */
  private rect(a: [number, number], b: [number, number], rows: number, cols: number): [number, number, number, number] {
    const r0 = Math.min(rows - 1, Math.floor(Math.min(a[0], b[0]))), c0 = Math.min(cols - 1, Math.floor(Math.min(a[1], b[1])));
    const r1 = Math.max(r0 + 1, Math.min(rows, Math.ceil(Math.max(a[0], b[0])))), c1 = Math.max(c0 + 1, Math.min(cols, Math.ceil(Math.max(a[1], b[1]))));
    return [r0, r1, c0, c1];
  }

  private profile(a: [number, number], b: [number, number]): void {
    const cur = this.host.current();
    if (!cur) return;
    const [rows, cols] = cur.shape;
    const { at, length } = lineSamples(a, b, rows, cols);
    const values = at.map(([r, c]) => cur.values[r * cols + c]);
    this.state.line = [a[0], a[1], b[0], b[1]];
    this.state.samples = values;
    const nm = this.host.nmPerStep;
    const where = `from scan (${a[0].toFixed(1)}, ${a[1].toFixed(1)}) to (${b[0].toFixed(1)}, ${b[1].toFixed(1)})`;
    this.plot.show({ title: `${this.host.title()}: line ${where}`, values, xLabel: nm ? "distance along the line (nm)" : "distance along the line (scan steps)",
      xExtent: nm ? length * nm : length, yLabel: "summed counts", note: `${values.length} samples, one per scan step, each the position under the line` });
  }

  private async region(a: [number, number], b: [number, number]): Promise<void> {
    const cur = this.host.current();
    if (!cur) return;
    const [r0, r1, c0, c1] = this.rect(a, b, cur.shape[0], cur.shape[1]);
    this.state.region = [r0, r1, c0, c1];
    await this.host.onRegion([r0, r1], [c0, c1]);
  }
}
