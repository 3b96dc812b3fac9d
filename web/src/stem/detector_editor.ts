// The virtual detector drawn on the diffraction pattern and edited by dragging: an annulus (dragging moves the
// nearer radius to the pointer's distance from the disk centre), a disk (inner radius 0, dragging sets the outer)
// or a rectangle (dragging spans it from where the pointer went down, in whole detector pixels, half-open
// [r0, r1) × [c0, c1) as the server's rect= parameter). It gives the server's request parameters and the pixel list
// the page's kernels sum, both following the server's rules (webgpu/masked_sums.ts), and the read-out in px and mrad.
import { annulusPixels, rectanglePixels } from "./webgpu/block";

export type DetectorShape = "annulus" | "disk" | "rectangle";

export interface Detector {
  shape: DetectorShape;
  inner: number; // px (annulus, disk: 0)
  outer: number; // px
  rect: [number, number, number, number]; // r0, c0, r1, c1 (rectangle)
}

export class DetectorEditor {
  det: Detector;
  private dragging: "inner" | "outer" | "rect" | null = null;
  private anchor: [number, number] = [0, 0];

  constructor(
    private readonly canvas: HTMLCanvasElement,
    private readonly rows: number,
    private readonly cols: number,
    readonly center: [number, number],
    radius: number,
    private readonly mradPerPx: number | undefined,
    private readonly readout: HTMLElement,
    private readonly onChange: () => void,
  ) {
    const r = Math.round(radius);
    this.det = {
      shape: "annulus", inner: 0, outer: radius,
      rect: [Math.round(center[0]) - r, Math.round(center[1]) - r, Math.round(center[0]) + r + 1, Math.round(center[1]) + r + 1],
    };
    canvas.addEventListener("pointerdown", (ev) => this.down(ev));
    canvas.addEventListener("pointermove", (ev) => this.move(ev));
    const end = () => (this.dragging = null);
    canvas.addEventListener("pointerup", end);
    canvas.addEventListener("pointercancel", end);
  }

  /** Canvas pixels per detector pixel. */
  get scale(): number {
    return this.canvas.width / Math.max(this.rows, this.cols);
  }

  setShape(shape: DetectorShape): void {
    this.det.shape = shape;
    if (shape === "disk") this.det.inner = 0;
    this.draw();
  }

  setAnnulus(inner: number, outer: number): void {
    this.det.shape = this.det.shape === "rectangle" ? "annulus" : this.det.shape;
    this.det.inner = inner;
    this.det.outer = outer;
    if (inner > 0 && this.det.shape === "disk") this.det.shape = "annulus";
    this.draw();
  }

  /** The server's parameters for GET …/products/mask. */
  params(): Record<string, string> {
    const d = this.det;
    if (d.shape === "rectangle") return { rect: d.rect.join(",") };
    return { inner: d.inner.toFixed(3), outer: Number.isFinite(d.outer) ? d.outer.toFixed(3) : "inf", center: `${this.center[0]},${this.center[1]}` };
  }

  /** The detector's pixels (row-major), as the server selects them for params(). */
  pixels(): Uint32Array {
    const d = this.det;
    if (d.shape === "rectangle") return rectanglePixels(this.rows, this.cols, ...d.rect);
    const p = this.params();
    return annulusPixels(this.rows, this.cols, this.center[0], this.center[1], Number(p.inner), p.outer === "inf" ? Infinity : Number(p.outer));
  }

  draw(): void {
    const ctx = this.canvas.getContext("2d");
    if (!ctx) return;
    const s = this.scale;
    const d = this.det;
    ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    ctx.lineWidth = 2;
    const mrad = (px: number) => (this.mradPerPx ? ` (${(px * this.mradPerPx).toFixed(2)} mrad)` : "");
    if (d.shape === "rectangle") {
      const [r0, c0, r1, c1] = d.rect;
      ctx.strokeStyle = "#4dd2ff";
      ctx.strokeRect(c0 * s, r0 * s, (c1 - c0) * s, (r1 - r0) * s);
      this.readout.textContent = `rectangle: rows ${r0}–${r1 - 1}, columns ${c0}–${c1 - 1} (${(r1 - r0) * (c1 - c0)} px)` +
        (this.mradPerPx ? `, ${((r1 - r0) * this.mradPerPx).toFixed(2)} × ${((c1 - c0) * this.mradPerPx).toFixed(2)} mrad` : "");
    } else {
      const [cy, cx] = [(this.center[0] + 0.5) * s, (this.center[1] + 0.5) * s];
      const rings: [number, string][] = d.shape === "disk" ? [[d.outer, "#4dd2ff"]] : [[d.inner, "#ff4d4d"], [d.outer, "#4dd2ff"]];
      for (const [r, colour] of rings) {
        ctx.strokeStyle = colour;
        ctx.beginPath();
        ctx.arc(cx, cy, Math.max(0, Math.min(r, 1e6) * s), 0, 2 * Math.PI);
        ctx.stroke();
      }
      const outer = Number.isFinite(d.outer) ? `${d.outer.toFixed(2)} px${mrad(d.outer)}` : "∞";
      this.readout.textContent = d.shape === "disk" ? `disk: radius ${outer}` : `annulus: inner ${d.inner.toFixed(2)} px${mrad(d.inner)}, outer ${outer}`;
    }
    this.canvas.dataset.shape = d.shape;
    this.canvas.dataset.inner = String(d.inner);
    this.canvas.dataset.outer = String(d.outer);
  }

  private at(ev: PointerEvent): [number, number] {
    const r = this.canvas.getBoundingClientRect();
    const x = (((ev.clientX - r.left) / r.width) * this.canvas.width) / this.scale - 0.5;
    const y = (((ev.clientY - r.top) / r.height) * this.canvas.height) / this.scale - 0.5;
    return [y, x];
  }

  private down(ev: PointerEvent): void {
    const [y, x] = this.at(ev);
    if (this.det.shape === "rectangle") {
      this.dragging = "rect";
      this.anchor = [Math.round(y), Math.round(x)];
    } else {
      const d = Math.hypot(y - this.center[0], x - this.center[1]);
      this.dragging = this.det.shape === "disk" || Math.abs(d - this.det.outer) <= Math.abs(d - this.det.inner) ? "outer" : "inner";
    }
    this.canvas.setPointerCapture?.(ev.pointerId);
  }

  private move(ev: PointerEvent): void {
    if (!this.dragging) return;
    const [y, x] = this.at(ev);
    const det = this.det;
    if (this.dragging === "rect") {
      const clampR = (v: number) => Math.min(this.rows, Math.max(0, v));
      const clampC = (v: number) => Math.min(this.cols, Math.max(0, v));
      const [ar, ac] = this.anchor;
      const [br, bc] = [Math.round(y), Math.round(x)];
      det.rect = [clampR(Math.min(ar, br)), clampC(Math.min(ac, bc)), clampR(Math.max(ar, br) + 1), clampC(Math.max(ac, bc) + 1)];
    } else {
      const d = Math.hypot(y - this.center[0], x - this.center[1]);
      if (this.dragging === "inner") det.inner = Math.min(d, det.outer);
      else det.outer = Math.max(d, det.inner);
    }
    this.draw();
    this.onChange();
  }
}
