// The numbers around the acquisition page's pictures (figure.ts): colour bars of the displayed values with ticks
// in data units (counts; log1p places them where that transform puts them), detector axes in mrad counted from the
// bright-field disk's centre (pixels when the angle per pixel is unknown), and scan axes in nm (scan positions
// when the step is unknown).
import { colourBarTicks } from "../colour_bar_ticks";
import { type FigureAxis, type FigureColourBar, type FigureTick, physicalTicks } from "../figure";
import { colormapTable } from "../webgpu/colormap_tables";
import type { GridDisplay } from "./grid_draw";

/** An end of a colour bar: integers (counts) exactly, other values to 5 significant digits. */
const label = (v: number) => (Number.isInteger(v) && Math.abs(v) < 1e12 ? String(v) : String(Number(v.toPrecision(5))));

/** The colour bar of values drawn with `display` between `used` (transformed units, as drawGrid returns them). */
export function colourBarOf(display: GridDisplay, used: [number, number], what: string): FigureColourBar {
  const log = display.transform === "log";
  // drawGrid's log is log1p of the non-negative part, which for x >= 0 is the display kernels' signed-log.
  const [lo, hi] = log ? [Math.expm1(used[0]), Math.expm1(used[1])] : used;
  const inner = colourBarTicks(lo, hi, log ? "signed-log" : "linear", 0.1, 4).map((t): FigureTick => ({ at: t.position, label: t.label }));
  const ends = hi > lo ? [{ at: 0, label: label(lo) }, { at: 1, label: label(hi) }] : [{ at: 0, label: label(lo) }];
  return { table: colormapTable(display.colormap), ticks: [ends[0], ...inner, ...ends.slice(1)], label: `${what}${log ? " (log1p)" : ""}` };
}

/** Axes of a rows × cols detector image: mrad from the disk's centre (row, col in pixels) when known, else pixels. */
export function detectorAxes(rows: number, cols: number, centre: [number, number], mradPerPx?: number): { x: FigureAxis; y: FigureAxis } {
  if (mradPerPx && mradPerPx > 0)
    return {
      x: { label: "detector angle, columns (mrad from the disk's centre)", ticks: physicalTicks(cols * mradPerPx, 5, (centre[1] + 0.5) * mradPerPx) },
      y: { label: "angle, rows (mrad)", ticks: physicalTicks(rows * mradPerPx, 5, (centre[0] + 0.5) * mradPerPx) },
    };
  return { x: { label: "detector column (px)", ticks: physicalTicks(cols, 5) }, y: { label: "row (px)", ticks: physicalTicks(rows, 5) } };
}

/** Axes of a rows × cols scan image: nm from the first position's edge when the step is known, else positions. */
export function scanAxes(rows: number, cols: number, nmPerStep?: number): { x: FigureAxis; y: FigureAxis } {
  if (nmPerStep && nmPerStep > 0)
    return { x: { label: "scan x (nm)", ticks: physicalTicks(cols * nmPerStep, 5) }, y: { label: "scan y (nm)", ticks: physicalTicks(rows * nmPerStep, 5) } };
  return { x: { label: "scan column", ticks: physicalTicks(cols, 5) }, y: { label: "scan row", ticks: physicalTicks(rows, 5) } };
}
